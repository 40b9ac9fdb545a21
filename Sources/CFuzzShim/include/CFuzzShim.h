#ifndef CFUZZSHIM_H
#define CFUZZSHIM_H
// The bridge to libFuzzer for `kvfuzz`. libFuzzer's driver is declared weak, so the package
// links without it (a normal `swift build`); `Scripts/fuzz` links it with -sanitize=fuzzer.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Called by libFuzzer with each input; returns 0.
typedef int (*kv_fuzz_callback)(const uint8_t *data, size_t size);

/// Runs libFuzzer's driver over `callback` (libFuzzer parses `argc`/`argv` as its own flags and
/// corpus directories) and returns its exit status, or -1 when libFuzzer is not linked in.
int kv_run_fuzzer(int *argc, char ***argv, kv_fuzz_callback callback);

#ifdef __cplusplus
}
#endif

#endif
