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
// choice by then and no BLAS call of the program's has run yet. The choice is made again with
// gotoblas_dynamic_quit and gotoblas_dynamic_init, which read it from OPENBLAS_CORETYPE only, and
// between the two the kernel table is NULL; nothing of OpenBLAS's may run beside them. A pthreads
// build has started its workers already, and a worker that is late to start allocates its buffer
// then, which runs gotoblas_dynamic_init too when the table is NULL (0.3.21's memory.c): the two
// initialisations interleaved have crashed a process at load, about once in a thousand. So the
// workers are stopped and joined first (blas_thread_shutdown_, what OpenBLAS's own fork handler
// calls); the first threaded call after this starts them again, on the new kernels. Where stopping
// them is not exported (a pthreads build without it), nothing is replaced. The environment variable
// is set for the moment of the swap only; at load, before the program's own code has run, no other
// thread is expected to read the environment.
static const char *replaced_core = NULL;
static int workers_ran_at_replacement = -1;

__attribute__((constructor)) static void replace_fallback_core(void) {
    if (getenv("OPENBLAS_CORETYPE") != NULL) return;   // the user's choice stands
    char *(*corename)(void) = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_corename");
    int (*parallel)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_parallel");
    int (*stop_workers)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "blas_thread_shutdown_");
    void (*quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
    void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    if (corename == NULL || parallel == NULL || quit == NULL || init == NULL) return;
    if (strcmp(corename(), "Prescott") != 0) return;
    int pthreads = parallel() == 1;   // 0: a serial build, 2: OpenMP threads, which start per call
    if (pthreads && stop_workers == NULL) return;
    const char *better = kv_blas_core_for_instructions();
    if (better == NULL) return;
    if (pthreads) stop_workers();
    const int *workers_running = (const int *)dlsym(RTLD_DEFAULT, "blas_server_avail");
    if (setenv("OPENBLAS_CORETYPE", better, 1) != 0) return;
    if (workers_running != NULL) workers_ran_at_replacement = *workers_running != 0;
    quit();
    init();
    unsetenv("OPENBLAS_CORETYPE");
    replaced_core = "Prescott";
}

const char *kv_blas_replaced_core(void) { return replaced_core; }
int kv_blas_workers_ran_at_replacement(void) { return replaced_core != NULL ? workers_ran_at_replacement : -1; }
#else
const char *kv_blas_core_for_instructions(void) { return NULL; }
const char *kv_blas_replaced_core(void) { return NULL; }
int kv_blas_workers_ran_at_replacement(void) { return -1; }
#endif
