// A harness for the kernel-set replacement at load (blas_core.c): a process that links OpenBLAS and
// the package's C kernels, runs one threaded sgemm and prints which kernels ran and with how many
// threads. Run alone it shows the replacement; run a few thousand times it shows whether loading is
// safe, which one run cannot (a race between the replacement and OpenBLAS's workers starting up
// crashed about one process in a thousand before they were stopped first). Not part of any target;
// build and run it from the repository's root:
//
//   clang -O2 -I Sources/CKernels/include -I Sources/CKernels Sources/CKernels/*.c \
//       Benchmarks/harness/blas-core-load.c -o .build/blas-core-load -lopenblas -lm -ldl -lpthread
//   for i in $(seq 2000); do .build/blas-core-load > /dev/null || echo "run $i failed: $?"; done

#include "CKernels.h"
#include <dirent.h>
#include <stdio.h>

void cblas_sgemm(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
char *openblas_get_corename(void);

static int threads(void) {
    int count = 0;
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL) return -1;
    for (struct dirent *entry; (entry = readdir(tasks)) != NULL;) count += entry->d_name[0] != '.';
    closedir(tasks);
    return count;
}

int main(void) {
    enum { n = 256 };
    static float a[n * n], b[n * n], c[n * n];
    for (int i = 0; i < n * n; i++) a[i] = b[i] = 1;
    int before = threads();
    cblas_sgemm(101, 111, 111, n, n, n, 1, a, n, b, n, 0, c, n);   // row major, no transposes
    const char *replaced = kv_blas_replaced_core();
    printf("kernels %s (replaced %s, workers running at the swap: %d), threads %d before sgemm, %d after\n",
           openblas_get_corename(), replaced ? replaced : "nothing", kv_blas_workers_ran_at_replacement(),
           before, threads());
    return c[0] == n && c[n * n - 1] == n ? 0 : 1;
}
