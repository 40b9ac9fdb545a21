// A harness for how well the skinny tiles overlap their stream with their arithmetic: on `threads`
// threads (each its own band of rows), kv_skinny_gemm_packed over `megabytes` of packed float32
// weights of k columns, read from DRAM once per pass, against (a) a plain streaming read of the same
// bands, the stream's ceiling, and (b) the same tiles on a block of each band that stays in L2, run
// for as many FLOPs, the arithmetic's ceiling. Best of `repeats` passes each, alternating. A pass
// that overlaps perfectly takes max(a, b); one that does not overlap at all takes a + b.
// Not part of any target; build it against the package's C kernels from the repository's root:
//
//   clang -O2 -mavx512f -I Sources/CKernels/include -I Sources/CKernels Sources/CKernels/*.c \
//       Benchmarks/harness/skinny-stream.c -o .build/skinny-stream -lm -ldl -lpthread
//   .build/skinny-stream [rows] [k] [megabytes] [threads] [repeats]
//
// The kernels' own switches apply (KVSESSION_PREFETCH_L2, KVSESSION_PAIR_TILES, KVSESSION_AVX512...).

#include "CKernels.h"
#include "harness.h"
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

enum { MOST_THREADS = 8 };
static ptrdiff_t rows, k, bandRows, blockRows;
static float *weights, *x;
static float *y[MOST_THREADS];
static volatile float sink[MOST_THREADS];
static pthread_barrier_t start, done;
static int mode;   // 0 stream the tiles, 1 read, 2 tiles in L2, 3 stop

// The plain read: four 512-bit sums over the band, so the loads are all that limits it.
__attribute__((target("avx512f"))) static float read_band(const float *p, ptrdiff_t n) {
    __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
    for (ptrdiff_t i = 0; i + 64 <= n; i += 64) {
        a = _mm512_add_ps(a, _mm512_load_ps(p + i)), b = _mm512_add_ps(b, _mm512_load_ps(p + i + 16));
        c = _mm512_add_ps(c, _mm512_load_ps(p + i + 32)), d = _mm512_add_ps(d, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
}

static void *worker(void *arg) {
    const ptrdiff_t id = (ptrdiff_t)arg;
    const float *band = weights + id * bandRows * k;
    for (;;) {
        pthread_barrier_wait(&start);
        if (mode == 3) return NULL;
        if (mode == 0) kv_skinny_gemm_packed(x, k, rows, band, bandRows, k, y[id], bandRows, 1, 0);
        else if (mode == 1) sink[id] = read_band(band, bandRows * k);
        else   // as many FLOPs as the band, on its first block, over and over
            for (ptrdiff_t covered = 0; covered < bandRows; covered += blockRows)
                kv_skinny_gemm_packed(x, k, rows, band, blockRows, k, y[id], bandRows, 1, 0);
        pthread_barrier_wait(&done);
    }
}

static double pass(int which) {
    mode = which;
    double begin = seconds();
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&done);
    return seconds() - begin;
}

int main(int argc, char **argv) {
    rows = argc > 1 ? atol(argv[1]) : 16, k = argc > 2 ? atol(argv[2]) : 768;
    const double megabytes = argc > 3 ? atof(argv[3]) : 400;
    const int threads = argc > 4 ? atoi(argv[4]) : 2, repeats = argc > 5 ? atoi(argv[5]) : 7;
    const ptrdiff_t group = 2 * kv_pack_group();
    blockRows = (ptrdiff_t)(512 * 1024 / (k * sizeof(float))) / group * group;   // 512 KB: in L2
    bandRows = (ptrdiff_t)(megabytes * 1e6 / threads / (k * sizeof(float))) / blockRows * blockRows;
    if (rows < 1 || rows > 64 || k < 8 || threads < 1 || threads > MOST_THREADS || blockRows < group || bandRows < blockRows) {
        fprintf(stderr, "rows 1-64, k at least 8, threads 1-%d, and enough megabytes for a block a thread\n", MOST_THREADS);
        return 1;
    }
    const ptrdiff_t total = threads * bandRows;
    // Huge pages where the system offers them, as the runtime maps its weights (LargeMapping.swift).
    const size_t weightBytes = ((size_t)(total * k) * sizeof(float) + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    weights = mmap(NULL, weightBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (weights == MAP_FAILED) return 1;
    if (!getenv("SMALL_PAGES")) madvise(weights, weightBytes, MADV_HUGEPAGE);
    x = lines((size_t)(64 * k));
    float *block = lines((size_t)(blockRows * k)), *scratch = lines((size_t)(group * k));
    if (!weights || !x || !block || !scratch) return 1;
    for (ptrdiff_t i = 0; i < blockRows * k; i++) block[i] = (float)(i % 97) * 0.01f - 0.4f;
    kv_pack8_f32(block, blockRows, k, scratch);   // in place
    for (ptrdiff_t b = 0; b < total; b += blockRows) memcpy(weights + b * k, block, (size_t)(blockRows * k) * sizeof(float));
    for (ptrdiff_t i = 0; i < 64 * k; i++) x[i] = (float)(i % 89) * 0.01f - 0.3f;
    for (int t = 0; t < threads; t++)
        if (!(y[t] = lines((size_t)(64 * bandRows)))) return 1;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1), pthread_barrier_init(&done, NULL, (unsigned)threads + 1);
    pthread_t ids[MOST_THREADS];
    for (int t = 0; t < threads; t++) pthread_create(&ids[t], NULL, worker, (void *)(ptrdiff_t)t);
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < repeats; r++)
        for (int m = 0; m < 3; m++) {
            double s = pass(m);
            best[m] = s < best[m] ? s : best[m];
        }
    const double bytes = (double)total * k * sizeof(float), flops = 2.0 * rows * total * k;
    const double larger = best[1] > best[2] ? best[1] : best[2];
    printf("rows %2td k %td, %d threads, %.0f MB: tiles %.2f ms (%.1f GB/s, %.1f GFLOP/s), read %.2f ms (%.1f GB/s), "
           "tiles in L2 %.2f ms (%.1f GFLOP/s); tiles / max %.2f, / sum %.2f\n",
           rows, k, threads, bytes / 1e6, best[0] * 1e3, bytes / best[0] / 1e9, flops / best[0] / 1e9, best[1] * 1e3,
           bytes / best[1] / 1e9, best[2] * 1e3, flops / best[2] / 1e9, best[0] / larger, best[0] / (best[1] + best[2]));
    mode = 3;
    pthread_barrier_wait(&start);
    for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
    return 0;
}
