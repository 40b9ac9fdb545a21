// OpenBLAS's kernel set for CPUs newer than the OpenBLAS that runs on them (kv_blas_replaced_core).
//
// A DYNAMIC_ARCH OpenBLAS picks its kernels by CPUID family and model when the library loads. A
// model its release does not list gets the generic Prescott kernels (SSE3), whatever the CPU's
// vector units: Debian 12's OpenBLAS 0.3.21 does that on Intel's Emerald Rapids (family 6, model
// 207), where its sgemm then runs at a fraction of what the Cooperlake kernels reach on the same
// CPU. The library exports the two calls that make the choice, so the choice can be made again,
// this time by the instructions the CPU and the system support. Nothing here links OpenBLAS: the
// calls are looked up at run time, and nothing is done where they are missing (a build
// for one CPU, another BLAS).

#include "CKernels.h"
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__)) && defined(__linux__)
#include <dlfcn.h>

// The best of OpenBLAS's x86-64 kernel sets this CPU and system can run, judged by instruction set
// alone (for a CPU OpenBLAS does not know, nothing else is known of it) and present in the loaded
// library (its table `gotoblas_NAME` is exported), or NULL below AVX2.
const char *kv_blas_core_for_instructions(void) {
    __builtin_cpu_init();   // the checks below include the system's support for the vector state (XCR0)
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd")
        && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("avx512vl");
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const struct { const char *name, *table; int runs; } cores[] = {
        { "Cooperlake", "gotoblas_COOPERLAKE", avx512 && __builtin_cpu_supports("avx512bf16") },
        { "SkylakeX", "gotoblas_SKYLAKEX", avx512 },
        { "Haswell", "gotoblas_HASWELL", avx2 },
    };
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
        if (cores[i].runs && dlsym(RTLD_DEFAULT, cores[i].table) != NULL) return cores[i].name;
    return NULL;
}

// Replaced when the library loads: OpenBLAS, a dependency of whatever links this, has made its own
// choice by then, no BLAS call has run yet, and no thread of the program's but this one runs to read
// the environment while it briefly holds OPENBLAS_CORETYPE (gotoblas_dynamic_init reads the choice
// from there only; OpenBLAS's own idle workers never do).
static const char *replaced_core = NULL;

__attribute__((constructor)) static void replace_fallback_core(void) {
    if (getenv("OPENBLAS_CORETYPE") != NULL) return;   // the user's choice stands
    char *(*corename)(void) = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_corename");
    void (*quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
    void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    if (corename == NULL || quit == NULL || init == NULL || strcmp(corename(), "Prescott") != 0) return;
    const char *better = kv_blas_core_for_instructions();
    if (better == NULL || setenv("OPENBLAS_CORETYPE", better, 1) != 0) return;
    quit();
    init();
    unsetenv("OPENBLAS_CORETYPE");
    replaced_core = "Prescott";
}

const char *kv_blas_replaced_core(void) { return replaced_core; }
#else
const char *kv_blas_core_for_instructions(void) { return NULL; }
const char *kv_blas_replaced_core(void) { return NULL; }
#endif
