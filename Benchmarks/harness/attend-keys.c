// A harness for the few-query attention kernel alone: one thread, kv_attend_keys for `positions`
// new tokens of `base`'s shape (4 K/V heads of 64, 3 query heads each) over `keys` cached keys,
// best of five batches. With the default 1,536 keys (one worker's half of a 3,030-key cache hit)
// the 3 MB of key and value rows stay in L2 and L3 between calls, so it measures the kernel's
// arithmetic, not the stream. Not part of any target; build it from the repository's root:
//
//   clang -O2 -I Sources/CKernels/include -I Sources/CKernels Sources/CKernels/*.c \
//       Benchmarks/harness/attend-keys.c -o .build/attend-keys -lm -ldl -lpthread
//   .build/attend-keys [keys] [positions...]
//
// KVSESSION_AVX512=0 runs the AVX2 bodies instead; PAD=n spaces the key and value rows n floats
// further apart than the cache does (to see what L1 set conflicts cost).

#include "CKernels.h"
#include "harness.h"
#include <stdio.h>

int main(int argc, char **argv) {
    const ptrdiff_t keys = argc > 1 ? atol(argv[1]) : 1536, kvHeads = 4, group = 3, headDim = 64, tile = 128, most = 64;
    const ptrdiff_t ldkv = kvHeads * headDim + (getenv("PAD") ? atol(getenv("PAD")) : 0), ldq = kvHeads * group * headDim, rows = group * most;
    if (keys < most) {
        fprintf(stderr, "keys must be at least %td\n", most);
        return 1;
    }
    float *k = lines((size_t)(keys * ldkv)), *v = lines((size_t)(keys * ldkv)), *q = lines((size_t)(most * ldq));
    float *work = lines((size_t)kv_attend_work_floats(kvHeads, rows, headDim, tile));
    float *stats = lines((size_t)(kvHeads * rows * 2)), *o = lines((size_t)(kvHeads * rows * headDim));
    if (!k || !v || !q || !work || !stats || !o) return 1;
    for (ptrdiff_t i = 0; i < keys * ldkv; i++) k[i] = (float)(i % 97) * 0.01f - 0.5f, v[i] = (float)(i % 89) * 0.01f;
    for (ptrdiff_t i = 0; i < most * ldq; i++) q[i] = (float)(i % 83) * 0.01f - 0.4f;
    int defaults[] = {1, 4, 11, 16, 30};
    int count = argc > 2 ? argc - 2 : (int)(sizeof defaults / sizeof defaults[0]);
    for (int c = 0; c < count; c++) {
        const ptrdiff_t positions = argc > 2 ? atol(argv[2 + c]) : defaults[c];
        if (positions < 1 || positions > most) continue;
        const int calls = 50;
        double best = 1e30;
        for (int batch = 0; batch < 5; batch++) {
            double start = seconds();
            for (int call = 0; call < calls; call++)
                kv_attend_keys(q, ldq, positions, group, kvHeads, headDim, keys - positions, k, v, ldkv, 0, keys, keys, 1,
                               tile, 0.125f, work, stats, rows * 2, o, headDim, rows * headDim);
            double each = (seconds() - start) / calls;
            best = each < best ? each : best;
        }
        // Scores and weighted values: two multiply-adds per query head, key and dimension.
        double flops = 4.0 * positions * group * kvHeads * keys * headDim;
        printf("positions %2td over %td keys: %7.1f us, %6.1f GFLOP/s\n", positions, keys, best * 1e6, flops / best / 1e9);
    }
    free(k), free(v), free(q), free(work), free(stats), free(o);
    return 0;
}
