// A harness for the skinny projection's tiles alone: one thread, kv_skinny_gemm_packed over `outputs`
// packed float32 weight rows of k columns small enough to stay in L2 (by default 256 x 768, 768 KB),
// or kv_skinny_gemm_f16_packed over as many half rows with `f16` (converted in registers), for
// several activation row counts, best of five batches. It tells the tiles' arithmetic rate from
// the stream that limits them inside a pass (`kvbench kernels --breakdown`). Not part of any target;
// build it against the package's C kernels from the repository's root:
//
//   clang -O2 -I Sources/CKernels/include -I Sources/CKernels Sources/CKernels/*.c \
//       Benchmarks/harness/skinny-tile.c -o .build/skinny-tile -lm -ldl -lpthread
//   .build/skinny-tile [outputs] [k] [f32 | f16]
//
// KVSESSION_AVX512=0 runs the AVX2 tiles instead.

#include "CKernels.h"
#include "harness.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// The bits of the IEEE half nearest to f (the compiler's conversion, round to nearest even).
static uint16_t half_of(float f) {
    _Float16 half = (_Float16)f;
    uint16_t bits;
    memcpy(&bits, &half, sizeof bits);
    return bits;
}

int main(int argc, char **argv) {
    const ptrdiff_t outputs = argc > 1 ? atol(argv[1]) : 256, k = argc > 2 ? atol(argv[2]) : 768, most = 64;
    if (outputs <= 0 || outputs % kv_pack_group() != 0 || k <= 0) {
        fprintf(stderr, "outputs must be a positive multiple of %td, k positive\n", kv_pack_group());
        return 1;
    }
    const int halfs = argc > 3 && strcmp(argv[3], "f16") == 0;
    float *w = lines((size_t)(outputs * k)), *x = lines((size_t)(most * k)), *y = lines((size_t)(most * outputs));
    float *group = lines((size_t)(kv_pack_group() * k));
    if (!w || !x || !y || !group) return 1;
    for (ptrdiff_t i = 0; i < outputs * k; i++) w[i] = (float)(i % 97) * 0.01f;
    for (ptrdiff_t i = 0; i < most * k; i++) x[i] = (float)(i % 89) * 0.01f;
    uint16_t *h = (uint16_t *)w;   // halfs in place: element i is written after element i is read
    if (halfs) {
        for (ptrdiff_t i = 0; i < outputs * k; i++) h[i] = half_of(w[i]);
        kv_pack8_f16(h, outputs, k, (uint16_t *)group);
    } else
        kv_pack8_f32(w, outputs, k, group);
    const int counts[] = {1, 2, 4, 8, 12, 16, 24, 32, 64};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        const int rows = counts[c], calls = 200;
        double best = 1e30;
        for (int batch = 0; batch < 5; batch++) {
            double start = seconds();
            for (int call = 0; call < calls; call++)
                if (halfs) kv_skinny_gemm_f16_packed(x, k, rows, h, outputs, k, y, outputs, 1, 0);
                else kv_skinny_gemm_packed(x, k, rows, w, outputs, k, y, outputs, 1, 0);
            double each = (seconds() - start) / calls;
            best = each < best ? each : best;
        }
        printf("rows %2d: %6.1f GFLOP/s, %6.1f GB/s of weights\n", rows, 2.0 * rows * outputs * k / best / 1e9,
               (double)(outputs * k) * (halfs ? 2 : 4) / best / 1e9);
    }
    free(w), free(x), free(y), free(group);
    return 0;
}
