#include "CFuzzShim.h"

// Present only when the binary is linked with libFuzzer (-sanitize=fuzzer); null otherwise.
extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t))
    __attribute__((weak));

int kv_run_fuzzer(int *argc, char ***argv, kv_fuzz_callback callback) {
    if (!LLVMFuzzerRunDriver) return -1;
    return LLVMFuzzerRunDriver(argc, argv, callback);
}
