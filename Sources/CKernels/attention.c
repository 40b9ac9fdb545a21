// Attention for a few queries over many keys: a decode step, or the new tokens of a cache hit.
// With few queries, two BLAS calls per key tile cost more in packing and dispatch than in
// arithmetic. Here each key tile's scores are dot products of the stacked queries with the key
// rows (few queries) or a product with the tile transposed in registers (12 or more), the softmax
// runs on them in place, and the weighted values are summed by a kernel that keeps a block of
// output rows in registers over the whole tile. Keys are split into parts that are merged
// afterwards (flash-decoding), so one query's keys can spread over several threads.

#include "CKernels.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#define KV_X86 1
#include <immintrin.h>
#include "prefetch.h"
#else
#define KV_X86 0
#endif

// The order in which a dot product's eight lanes are summed, on every body: pairs of neighbours,
// then pairs of pairs, then the two halves, which is what a tree of horizontal adds gives.
static inline float reduce_lanes(const float *lane) {
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Memory a kernel reads later, prefetched while it computes: `per` lines per step (a block of
// products), `left` lines to go from `at`. The register-tiled products spread a step's lines
// over their own iterations, one every few FMAs: issued in a burst, 30 or 60 prefetches that
// miss fill the core's miss buffers and stall it until most have arrived (on a Zen 1, 4 new
// tokens' attention over 500 keys ran 11% faster spread than in bursts at each step's start).
typedef struct {
    const char *at;
    ptrdiff_t left, per;
} ahead_t;

// A step's lines in one burst (the edge kernels, whose steps are short).
static inline void ahead_step(ahead_t *ahead) {
    if (!ahead) return;
    for (ptrdiff_t i = 0; i < ahead->per && ahead->left > 0; i++, ahead->left--, ahead->at += 64) __builtin_prefetch(ahead->at, 0, 3);
}

// Takes one step's lines from `ahead` (which may be NULL) for a kernel to spread over its own
// iterations: returns how many, and where they start in `*at`.
static inline ptrdiff_t ahead_take(ahead_t *ahead, const char **at) {
    ptrdiff_t lines = ahead ? (ahead->per < ahead->left ? ahead->per : ahead->left) : 0;
    *at = lines ? ahead->at : NULL;
    if (lines) { ahead->at += 64 * lines; ahead->left -= lines; }
    return lines;
}

// KVSESSION_ATTENTION_PREFETCH=0 turns the prefetching off (for measuring it).
static int prefetching = 1;
__attribute__((constructor)) static void read_prefetching(void) {
    const char *value = getenv("KVSESSION_ATTENTION_PREFETCH");
    prefetching = !(value && strcmp(value, "0") == 0);
}

// A cursor over `bytes` from `start` spread over `steps` steps.
static inline ahead_t ahead_over(const void *start, ptrdiff_t bytes, ptrdiff_t steps) {
    ptrdiff_t lines = prefetching && start && bytes > 0 ? (bytes + 63) / 64 : 0;
    ahead_t ahead = {(const char *)start, lines, steps > 0 ? (lines + steps - 1) / steps : lines};
    return ahead;
}

void kv_attention_scores_portable(const float *q, ptrdiff_t ldq, ptrdiff_t rows, const float *k, ptrdiff_t ldk,
                                  ptrdiff_t n, ptrdiff_t d, float *s, ptrdiff_t lds, float scale) {
    ptrdiff_t end = d - d % 8;
    for (ptrdiff_t r = 0; r < rows; r++)
        for (ptrdiff_t j = 0; j < n; j++) {
            const float *qr = q + r * ldq, *kj = k + j * ldk;
            float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (ptrdiff_t i = 0; i < end; i += 8)
                for (int l = 0; l < 8; l++) lane[l] = fmaf(qr[i + l], kj[i + l], lane[l]);
            float dot = reduce_lanes(lane);
            for (ptrdiff_t i = end; i < d; i++) dot = fmaf(qr[i], kj[i], dot);
            s[r * lds + j] = scale * dot;
        }
}

void kv_weighted_rows_add_portable(float *o, ptrdiff_t ldo, ptrdiff_t rows, const float *p, ptrdiff_t ldp,
                                   const float *v, ptrdiff_t ldv, ptrdiff_t n, ptrdiff_t cols) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        float *out = o + r * ldo;
        const float *weights = p + r * ldp;
        for (ptrdiff_t j = 0; j < n; j++) {
            const float weight = weights[j], *value = v + j * ldv;
            for (ptrdiff_t c = 0; c < cols; c++) out[c] = fmaf(weight, value[c], out[c]);
        }
    }
}

#if KV_X86
#define KV_AVX2 __attribute__((target("avx2,fma")))

// Four dot products' lanes summed at once, each in reduce_lanes' order: [a, b, c, d].
KV_AVX2 static inline __m128 reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 pairs = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));   // per 128-bit half: a b c d
    return _mm_add_ps(_mm256_castps256_ps128(pairs), _mm256_extractf128_ps(pairs, 1));
}

// The scalar tail of four dot products beyond the last full eight elements, then the scale.
KV_AVX2 static inline void finish4(__m128 dots, const float *q, const float *k, ptrdiff_t ldk, ptrdiff_t from,
                                   ptrdiff_t d, float scale, float *s, ptrdiff_t count) {
    if (from == d && count == 4) { _mm_storeu_ps(s, _mm_mul_ps(dots, _mm_set1_ps(scale))); return; }
    float dot[4];
    _mm_storeu_ps(dot, dots);
    for (ptrdiff_t j = 0; j < count; j++) {
        for (ptrdiff_t i = from; i < d; i++) dot[j] = fmaf(q[i], k[j * ldk + i], dot[j]);
        s[j] = scale * dot[j];
    }
}

// Three queries by four keys: 12 accumulators, 7 loads per 12 FMAs, and one horizontal-add
// tree per query for its four scores.
KV_AVX2 static void scores3x4(const float *q, ptrdiff_t ldq, const float *k, ptrdiff_t ldk, ptrdiff_t d, float *s,
                              ptrdiff_t lds, float scale, ahead_t *ahead) {
    ptrdiff_t end = d - d % 8, steps = end / 8 > 0 ? end / 8 : 1;
    const char *at;
    ptrdiff_t lines = ahead_take(ahead, &at), spread = 0;
    const float *q0 = q, *q1 = q + ldq, *q2 = q + 2 * ldq, *k0 = k, *k1 = k + ldk, *k2 = k + 2 * ldk, *k3 = k + 3 * ldk;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 x0 = _mm256_loadu_ps(q0 + i), x1 = _mm256_loadu_ps(q1 + i), x2 = _mm256_loadu_ps(q2 + i), y;
        for (spread += lines; spread >= steps; spread -= steps, at += 64) KV_PREFETCH(at);
        y = _mm256_loadu_ps(k0 + i);
        a00 = _mm256_fmadd_ps(x0, y, a00); a10 = _mm256_fmadd_ps(x1, y, a10); a20 = _mm256_fmadd_ps(x2, y, a20);
        y = _mm256_loadu_ps(k1 + i);
        a01 = _mm256_fmadd_ps(x0, y, a01); a11 = _mm256_fmadd_ps(x1, y, a11); a21 = _mm256_fmadd_ps(x2, y, a21);
        y = _mm256_loadu_ps(k2 + i);
        a02 = _mm256_fmadd_ps(x0, y, a02); a12 = _mm256_fmadd_ps(x1, y, a12); a22 = _mm256_fmadd_ps(x2, y, a22);
        y = _mm256_loadu_ps(k3 + i);
        a03 = _mm256_fmadd_ps(x0, y, a03); a13 = _mm256_fmadd_ps(x1, y, a13); a23 = _mm256_fmadd_ps(x2, y, a23);
    }
    finish4(reduce4(a00, a01, a02, a03), q0, k, ldk, end, d, scale, s, 4);
    finish4(reduce4(a10, a11, a12, a13), q1, k, ldk, end, d, scale, s + lds, 4);
    finish4(reduce4(a20, a21, a22, a23), q2, k, ldk, end, d, scale, s + 2 * lds, 4);
}

// One query by up to four keys (the edges), with the same arithmetic per score.
KV_AVX2 static void scores1x4(const float *q, const float *k, ptrdiff_t ldk, ptrdiff_t count, ptrdiff_t d, float *s,
                              float scale, ahead_t *ahead) {
    ptrdiff_t end = d - d % 8, steps = end / 8 > 0 ? end / 8 : 1;
    const char *at;
    ptrdiff_t lines = ahead_take(ahead, &at), spread = 0;
    const float *k1 = count > 1 ? k + ldk : k, *k2 = count > 2 ? k + 2 * ldk : k, *k3 = count > 3 ? k + 3 * ldk : k;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 x = _mm256_loadu_ps(q + i);
        for (spread += lines; spread >= steps; spread -= steps, at += 64) KV_PREFETCH(at);
        a0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + i), a0);
        a1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k1 + i), a1);
        a2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k2 + i), a2);
        a3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k3 + i), a3);
    }
    finish4(reduce4(a0, a1, a2, a3), q, k, ldk, end, d, scale, s, count);
}

// Steps for `ahead`: one per four keys.
KV_AVX2 static void attention_scores_avx2(const float *q, ptrdiff_t ldq, ptrdiff_t rows, const float *k, ptrdiff_t ldk,
                                          ptrdiff_t n, ptrdiff_t d, float *s, ptrdiff_t lds, float scale, ahead_t *ahead) {
    ptrdiff_t j = 0;
    for (; j + 4 <= n; j += 4) {   // four key rows stay in L1 while every query passes over them
        const float *kj = k + j * ldk;
        ptrdiff_t r = 0;   // the step's prefetches go with its first product
        for (; r + 3 <= rows; r += 3) scores3x4(q + r * ldq, ldq, kj, ldk, d, s + r * lds + j, lds, scale, r == 0 ? ahead : NULL);
        for (; r < rows; r++) scores1x4(q + r * ldq, kj, ldk, 4, d, s + r * lds + j, scale, r == 0 ? ahead : NULL);
    }
    if (j < n)
        for (ptrdiff_t r = 0; r < rows; r++) scores1x4(q + r * ldq, k + j * ldk, ldk, n - j, d, s + r * lds + j, scale, NULL);
}

// Three output rows by 32 columns: 12 accumulators; per key 4 value loads and 3 broadcasts feed
// 12 FMAs. Every lane runs fma(weight, value, acc) in key order, as the scalar tail does.
KV_AVX2 static void rows3x32(float *o, ptrdiff_t ldo, const float *p, ptrdiff_t ldp, const float *v, ptrdiff_t ldv,
                             ptrdiff_t n, int add, ahead_t *ahead) {
    const char *at;
    ptrdiff_t lines = ahead_take(ahead, &at), spread = 0;
    float *o0 = o, *o1 = o + ldo, *o2 = o + 2 * ldo;
    const float *p0 = p, *p1 = p + ldp, *p2 = p + 2 * ldp;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
    if (add) {
        a00 = _mm256_loadu_ps(o0); a01 = _mm256_loadu_ps(o0 + 8); a02 = _mm256_loadu_ps(o0 + 16); a03 = _mm256_loadu_ps(o0 + 24);
        a10 = _mm256_loadu_ps(o1); a11 = _mm256_loadu_ps(o1 + 8); a12 = _mm256_loadu_ps(o1 + 16); a13 = _mm256_loadu_ps(o1 + 24);
        a20 = _mm256_loadu_ps(o2); a21 = _mm256_loadu_ps(o2 + 8); a22 = _mm256_loadu_ps(o2 + 16); a23 = _mm256_loadu_ps(o2 + 24);
    }
    for (ptrdiff_t j = 0; j < n; j++) {
        const float *vj = v + j * ldv;
        for (spread += lines; spread >= n; spread -= n, at += 64) KV_PREFETCH(at);
        __m256 b0 = _mm256_broadcast_ss(p0 + j), b1 = _mm256_broadcast_ss(p1 + j), b2 = _mm256_broadcast_ss(p2 + j), x;
        x = _mm256_loadu_ps(vj);
        a00 = _mm256_fmadd_ps(b0, x, a00); a10 = _mm256_fmadd_ps(b1, x, a10); a20 = _mm256_fmadd_ps(b2, x, a20);
        x = _mm256_loadu_ps(vj + 8);
        a01 = _mm256_fmadd_ps(b0, x, a01); a11 = _mm256_fmadd_ps(b1, x, a11); a21 = _mm256_fmadd_ps(b2, x, a21);
        x = _mm256_loadu_ps(vj + 16);
        a02 = _mm256_fmadd_ps(b0, x, a02); a12 = _mm256_fmadd_ps(b1, x, a12); a22 = _mm256_fmadd_ps(b2, x, a22);
        x = _mm256_loadu_ps(vj + 24);
        a03 = _mm256_fmadd_ps(b0, x, a03); a13 = _mm256_fmadd_ps(b1, x, a13); a23 = _mm256_fmadd_ps(b2, x, a23);
    }
    _mm256_storeu_ps(o0, a00); _mm256_storeu_ps(o0 + 8, a01); _mm256_storeu_ps(o0 + 16, a02); _mm256_storeu_ps(o0 + 24, a03);
    _mm256_storeu_ps(o1, a10); _mm256_storeu_ps(o1 + 8, a11); _mm256_storeu_ps(o1 + 16, a12); _mm256_storeu_ps(o1 + 24, a13);
    _mm256_storeu_ps(o2, a20); _mm256_storeu_ps(o2 + 8, a21); _mm256_storeu_ps(o2 + 16, a22); _mm256_storeu_ps(o2 + 24, a23);
}

// One output row by 8 columns: the edges (fewer than three rows left, or columns beyond the
// last full 32), with the same per-lane arithmetic.
KV_AVX2 static void rows1x8(float *o, const float *p, const float *v, ptrdiff_t ldv, ptrdiff_t n, int add) {
    __m256 a = add ? _mm256_loadu_ps(o) : _mm256_setzero_ps();
    for (ptrdiff_t j = 0; j < n; j++) a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_loadu_ps(v + j * ldv), a);
    _mm256_storeu_ps(o, a);
}

// o = p v (add 0) or o += p v (add 1). Steps for `ahead`: one per block of three rows by 32 columns
// and one per row and 8 columns at the edges.
KV_AVX2 static void weighted_rows_avx2(float *o, ptrdiff_t ldo, ptrdiff_t rows, const float *p, ptrdiff_t ldp,
                                       const float *v, ptrdiff_t ldv, ptrdiff_t n, ptrdiff_t cols, int add, ahead_t *ahead) {
    ptrdiff_t wide = cols - cols % 32, vectors = cols - cols % 8, r = 0;
    for (; r + 3 <= rows; r += 3)
        for (ptrdiff_t c = 0; c < wide; c += 32) {
            rows3x32(o + r * ldo + c, ldo, p + r * ldp, ldp, v + c, ldv, n, add, ahead);
        }
    for (ptrdiff_t t = 0; t < rows; t++)
        for (ptrdiff_t c = t < r ? wide : 0; c < vectors; c += 8) {
            ahead_step(ahead);
            rows1x8(o + t * ldo + c, p + t * ldp, v + c, ldv, n, add);
        }
    if (vectors == cols) return;
    if (!add)
        for (ptrdiff_t t = 0; t < rows; t++) memset(o + t * ldo + vectors, 0, (size_t)(cols - vectors) * sizeof(float));
    kv_weighted_rows_add_portable(o + vectors, ldo, rows, p, ldp, v + vectors, ldv, n, cols - vectors);
}

// dst[j*ldd + i] = src[j*lds + i] for j < n, i < d: a head's value rows of a tile made dense.
KV_AVX2 static void copy_rows(float *dst, ptrdiff_t ldd, const float *src, ptrdiff_t lds, ptrdiff_t n, ptrdiff_t d) {
    ptrdiff_t d8 = d - d % 8;
    for (ptrdiff_t j = 0; j < n; j++) {
        ptrdiff_t i = 0;
        for (; i < d8; i += 8) _mm256_storeu_ps(dst + j * ldd + i, _mm256_loadu_ps(src + j * lds + i));
        for (; i < d; i++) dst[j * ldd + i] = src[j * lds + i];
    }
}

// kt[i*ldt + j] = k[j*ldk + i] for j < n, i < d: a tile of key rows turned into rows of dimensions,
// eight by eight in registers.
KV_AVX2 static void transpose_avx2(float *kt, ptrdiff_t ldt, const float *k, ptrdiff_t ldk, ptrdiff_t n, ptrdiff_t d) {
    ptrdiff_t n8 = n - n % 8, d8 = d - d % 8;
    for (ptrdiff_t j = 0; j < n8; j += 8)
        for (ptrdiff_t i = 0; i < d8; i += 8) {
            const float *src = k + j * ldk + i;
            __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ldk), r2 = _mm256_loadu_ps(src + 2 * ldk),
                   r3 = _mm256_loadu_ps(src + 3 * ldk), r4 = _mm256_loadu_ps(src + 4 * ldk), r5 = _mm256_loadu_ps(src + 5 * ldk),
                   r6 = _mm256_loadu_ps(src + 6 * ldk), r7 = _mm256_loadu_ps(src + 7 * ldk);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
                   t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                   t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
                   u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
                   u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
                   u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
            float *dst = kt + i * ldt + j;
            _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(dst + ldt, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(dst + 2 * ldt, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(dst + 3 * ldt, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(dst + 4 * ldt, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(dst + 5 * ldt, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(dst + 6 * ldt, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(dst + 7 * ldt, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
    for (ptrdiff_t j = 0; j < n; j++)
        for (ptrdiff_t i = j < n8 ? d8 : 0; i < d; i++) kt[i * ldt + j] = k[j * ldk + i];
}
#endif

#if KV_X86
// The AVX-512 body of weighted_rows_avx2: blocks of up to four output rows by up to 64 columns
// (four 16-wide vectors, the last one masked to the columns left), so a block holds up to 16
// accumulators and each key's value vectors feed four rows. Every lane still runs
// fma(weight, value, acc) in key order from the same start, so each output has the AVX2 body's
// bits (and the portable definition's); the switch is the skinny kernels' (kv_set_skinny_avx512).
#define KV_AVX512_TARGET "avx2,fma,avx512f,avx512dq,avx512vl"
#define KV_ROWS512 4

__attribute__((target(KV_AVX512_TARGET), always_inline)) static inline void
rows512(float *o, ptrdiff_t ldo, const float *p, ptrdiff_t ldp, const float *v, ptrdiff_t ldv, ptrdiff_t n, int add,
        __mmask16 last, ahead_t *ahead, const int R, const int W) {
    const char *at;
    ptrdiff_t lines = ahead_take(ahead, &at), spread = 0;
    __mmask16 mask[4];
    __m512 acc[KV_ROWS512][4];
    for (int w = 0; w < W; w++) mask[w] = w == W - 1 ? last : (__mmask16)0xffff;
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) acc[r][w] = add ? _mm512_maskz_loadu_ps(mask[w], o + r * ldo + 16 * w) : _mm512_setzero_ps();
    for (ptrdiff_t j = 0; j < n; j++) {
        const float *vj = v + j * ldv;
        for (spread += lines; spread >= n; spread -= n, at += 64) KV_PREFETCH(at);
        __m512 x[4];
        for (int w = 0; w < W; w++) x[w] = _mm512_maskz_loadu_ps(mask[w], vj + 16 * w);
        for (int r = 0; r < R; r++) {
            __m512 b = _mm512_set1_ps(p[r * ldp + j]);
            for (int w = 0; w < W; w++) acc[r][w] = _mm512_fmadd_ps(b, x[w], acc[r][w]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) _mm512_mask_storeu_ps(o + r * ldo + 16 * w, mask[w], acc[r][w]);
}

// transpose_avx2 sixteen by sixteen in 512-bit registers: 64 shuffles for 256 floats where the
// AVX2 body takes 96 (they share one port), half as many loads and stores. The keys beyond the last
// sixteen, and the dimensions beyond the last sixteen, go through transpose_avx2. On an Emerald
// Rapids its share of 11 new tokens' attention over 1,536 keys went from 17% to 9% (CPU-clock profile).
__attribute__((target(KV_AVX512_TARGET))) static void transpose_avx512(float *kt, ptrdiff_t ldt, const float *k,
                                                                        ptrdiff_t ldk, ptrdiff_t n, ptrdiff_t d) {
    ptrdiff_t n16 = n - n % 16, d16 = d - d % 16;
    for (ptrdiff_t j = 0; j < n16; j += 16)
        for (ptrdiff_t i = 0; i < d16; i += 16) {
            __m512 a[16], b[16], c[16];
            for (int r = 0; r < 16; r++) a[r] = _mm512_loadu_ps(k + (j + r) * ldk + i);
            for (int r = 0; r < 16; r += 2) {   // per 128-bit lane: pairs of rows interleaved
                b[r] = _mm512_unpacklo_ps(a[r], a[r + 1]);
                b[r + 1] = _mm512_unpackhi_ps(a[r], a[r + 1]);
            }
            for (int g = 0; g < 4; g++) {   // c[4g + m], lane L: rows 4g..4g+3 of element 4L + m
                c[4 * g] = _mm512_shuffle_ps(b[4 * g], b[4 * g + 2], 0x44);
                c[4 * g + 1] = _mm512_shuffle_ps(b[4 * g], b[4 * g + 2], 0xee);
                c[4 * g + 2] = _mm512_shuffle_ps(b[4 * g + 1], b[4 * g + 3], 0x44);
                c[4 * g + 3] = _mm512_shuffle_ps(b[4 * g + 1], b[4 * g + 3], 0xee);
            }
            for (int m = 0; m < 4; m++) {   // the four groups' lanes of element 4L + m gathered
                __m512 even01 = _mm512_shuffle_f32x4(c[m], c[4 + m], 0x88), odd01 = _mm512_shuffle_f32x4(c[m], c[4 + m], 0xdd);
                __m512 even23 = _mm512_shuffle_f32x4(c[8 + m], c[12 + m], 0x88), odd23 = _mm512_shuffle_f32x4(c[8 + m], c[12 + m], 0xdd);
                float *dst = kt + (i + m) * ldt + j;
                _mm512_storeu_ps(dst, _mm512_shuffle_f32x4(even01, even23, 0x88));
                _mm512_storeu_ps(dst + 4 * ldt, _mm512_shuffle_f32x4(odd01, odd23, 0x88));
                _mm512_storeu_ps(dst + 8 * ldt, _mm512_shuffle_f32x4(even01, even23, 0xdd));
                _mm512_storeu_ps(dst + 12 * ldt, _mm512_shuffle_f32x4(odd01, odd23, 0xdd));
            }
        }
    if (d16 < d) transpose_avx2(kt + d16 * ldt, ldt, k + d16, ldk, n16, d - d16);
    if (n16 < n) transpose_avx2(kt + n16, ldt, k + n16 * ldk, ldk, n - n16, d);
}

typedef void (*rows512_fn)(float *, ptrdiff_t, const float *, ptrdiff_t, const float *, ptrdiff_t, ptrdiff_t, int,
                           __mmask16, ahead_t *);
#define KV_ROWS512_BLOCK(R, W)                                                                                     \
    __attribute__((target(KV_AVX512_TARGET), noinline)) static void rows512_##R##x##W(                            \
        float *o, ptrdiff_t ldo, const float *p, ptrdiff_t ldp, const float *v, ptrdiff_t ldv, ptrdiff_t n, int add, \
        __mmask16 last, ahead_t *ahead) {                                                                            \
        rows512(o, ldo, p, ldp, v, ldv, n, add, last, ahead, R, W);                                                  \
    }
KV_ROWS512_BLOCK(1, 1) KV_ROWS512_BLOCK(1, 2) KV_ROWS512_BLOCK(1, 3) KV_ROWS512_BLOCK(1, 4)
KV_ROWS512_BLOCK(2, 1) KV_ROWS512_BLOCK(2, 2) KV_ROWS512_BLOCK(2, 3) KV_ROWS512_BLOCK(2, 4)
KV_ROWS512_BLOCK(3, 1) KV_ROWS512_BLOCK(3, 2) KV_ROWS512_BLOCK(3, 3) KV_ROWS512_BLOCK(3, 4)
KV_ROWS512_BLOCK(4, 1) KV_ROWS512_BLOCK(4, 2) KV_ROWS512_BLOCK(4, 3) KV_ROWS512_BLOCK(4, 4)
static const rows512_fn rows512_blocks[KV_ROWS512][4] = {
    {rows512_1x1, rows512_1x2, rows512_1x3, rows512_1x4}, {rows512_2x1, rows512_2x2, rows512_2x3, rows512_2x4},
    {rows512_3x1, rows512_3x2, rows512_3x3, rows512_3x4}, {rows512_4x1, rows512_4x2, rows512_4x3, rows512_4x4}};

// o = p v (add 0) or o += p v (add 1), as weighted_rows_avx2. Steps for `ahead`: one per block.
static void weighted_rows_avx512(float *o, ptrdiff_t ldo, ptrdiff_t rows, const float *p, ptrdiff_t ldp,
                                 const float *v, ptrdiff_t ldv, ptrdiff_t n, ptrdiff_t cols, int add, ahead_t *ahead) {
    for (ptrdiff_t c = 0; c < cols; c += 64) {
        ptrdiff_t width = cols - c < 64 ? cols - c : 64, vectors = (width + 15) / 16, left = width - 16 * (vectors - 1);
        __mmask16 last = (__mmask16)(left == 16 ? 0xffff : (1u << left) - 1);
        for (ptrdiff_t r = 0; r < rows; r += KV_ROWS512) {
            ptrdiff_t height = rows - r < KV_ROWS512 ? rows - r : KV_ROWS512;
            rows512_blocks[height - 1][vectors - 1](o + r * ldo + c, ldo, p + r * ldp, ldp, v + c, ldv, n, add, last, ahead);
        }
    }
}

// The steps weighted_rows_avx2 takes for `rows` by `cols`.
static ptrdiff_t weighted_steps(ptrdiff_t rows, ptrdiff_t cols) {
    ptrdiff_t wide = cols - cols % 32, vectors = cols - cols % 8, blocked = rows - rows % 3;
    return blocked / 3 * (wide / 32) + blocked * ((vectors - wide) / 8) + (rows - blocked) * (vectors / 8);
}

// The steps weighted_rows_avx512 takes for `rows` by `cols`.
static ptrdiff_t weighted_steps512(ptrdiff_t rows, ptrdiff_t cols) {
    return (cols + 63) / 64 * ((rows + KV_ROWS512 - 1) / KV_ROWS512);
}

// The weighted-rows body that runs: AVX-512 where switched on, else AVX2 (same bits either way).
static inline int weighted_rows_512(void) { return kv_uses_skinny_avx512(); }

static void weighted_rows_x86(float *o, ptrdiff_t ldo, ptrdiff_t rows, const float *p, ptrdiff_t ldp,
                              const float *v, ptrdiff_t ldv, ptrdiff_t n, ptrdiff_t cols, int add, ahead_t *ahead, int wide) {
    if (wide) weighted_rows_avx512(o, ldo, rows, p, ldp, v, ldv, n, cols, add, ahead);
    else weighted_rows_avx2(o, ldo, rows, p, ldp, v, ldv, n, cols, add, ahead);
}

// The steps weighted_rows_x86 takes for `rows` by `cols` on the body `wide` chooses.
static ptrdiff_t weighted_steps_x86(ptrdiff_t rows, ptrdiff_t cols, int wide) {
    return wide ? weighted_steps512(rows, cols) : weighted_steps(rows, cols);
}
#endif

void kv_weighted_rows_add(float *o, ptrdiff_t ldo, ptrdiff_t rows, const float *p, ptrdiff_t ldp,
                          const float *v, ptrdiff_t ldv, ptrdiff_t n, ptrdiff_t cols) {
#if KV_X86
    if (kv_uses_avx2()) { weighted_rows_x86(o, ldo, rows, p, ldp, v, ldv, n, cols, 1, NULL, weighted_rows_512()); return; }
#endif
    kv_weighted_rows_add_portable(o, ldo, rows, p, ldp, v, ldv, n, cols);
}

void kv_attention_scores(const float *q, ptrdiff_t ldq, ptrdiff_t rows, const float *k, ptrdiff_t ldk, ptrdiff_t n,
                         ptrdiff_t d, float *s, ptrdiff_t lds, float scale) {
#if KV_X86
    if (kv_uses_avx2()) { attention_scores_avx2(q, ldq, rows, k, ldk, n, d, s, lds, scale, NULL); return; }
#endif
    kv_attention_scores_portable(q, ldq, rows, k, ldk, n, d, s, lds, scale);
}

// From how many stacked queries the scores are a product with the transposed key tile rather
// than dot products: transposing costs a few shuffles per key, a dot product's horizontal sum
// a few per query and key.
enum { TRANSPOSED_FROM_ROWS = 12 };
// Keys per chunk of the AVX-512 weighted-values product over a tile (attend_tile).
enum { VALUE_CHUNK = 32 };
// Whether that product takes the tile a chunk at a time (1) or reads the value rows from a dense
// copy (0): by default on Intel's Emerald Rapids, where it was measured (48 KB 12-way L1: the 128
// lines of a chunk fill 16 sets two thirds); elsewhere not measured (a 32 KB 8-way L1 would hold
// them with no room to spare). KVSESSION_VALUE_CHUNKS=0 or 1 chooses. The same bits either way.
static int value_chunks = 0;
__attribute__((constructor)) static void read_value_chunks(void) {
    const char *choice = getenv("KVSESSION_VALUE_CHUNKS");
    value_chunks = choice ? strcmp(choice, "0") != 0 : kv_intel_emerald_rapids();
}

int kv_set_attention_value_chunks(int on) { return __atomic_exchange_n(&value_chunks, on != 0, __ATOMIC_RELAXED); }

int kv_uses_attention_value_chunks(void) {
    return kv_uses_skinny_avx512() && __atomic_load_n(&value_chunks, __ATOMIC_RELAXED);
}

ptrdiff_t kv_attend_work_floats(ptrdiff_t kvHeads, ptrdiff_t rows, ptrdiff_t headDim, ptrdiff_t tile) {
    return kvHeads * rows * headDim + rows * tile + headDim * tile;
}


// Scores of one head's stacked queries against a tile of its keys, then the tile's softmax step
// (running maximum and sum per row, earlier output rescaled when the maximum grows), then the
// tile's weighted values added to the output. The score products prefetch `ahead` bytes from
// `keysNext` and the value products as many from `valuesNext` (AVX2 bodies).
static void attend_tile(const float *stacked, ptrdiff_t rows, ptrdiff_t positions, ptrdiff_t headDim,
                        ptrdiff_t firstPosition, const float *k, const float *v, ptrdiff_t ldkv, ptrdiff_t start,
                        ptrdiff_t n, ptrdiff_t tile, float *scores, float *transposed, float *stats, float *o,
                        ptrdiff_t ldo, const char *keysNext, const char *valuesNext, ptrdiff_t ahead) {
#if KV_X86
    int avx2 = kv_uses_avx2(), wide = avx2 && weighted_rows_512();
    if (avx2 && rows >= TRANSPOSED_FROM_ROWS) {
        // A short last tile is padded with zero keys to whole blocks of 32 columns, so that no
        // score goes through the narrow edge kernels (the padded scores are never read).
        ptrdiff_t padded = (n + 31) / 32 * 32 <= tile ? (n + 31) / 32 * 32 : n;
        ahead_t keys = ahead_over(keysNext, ahead, weighted_steps_x86(rows, padded, wide));
        if (wide) transpose_avx512(transposed, tile, k, ldkv, n, headDim);
        else transpose_avx2(transposed, tile, k, ldkv, n, headDim);
        if (padded > n)
            for (ptrdiff_t i = 0; i < headDim; i++) memset(transposed + i * tile + n, 0, (size_t)(padded - n) * sizeof(float));
        weighted_rows_x86(scores, tile, rows, stacked, headDim, transposed, tile, headDim, padded, 0, &keys, wide);
    } else if (avx2) {
        ahead_t keys = ahead_over(keysNext, ahead, n / 4);
        attention_scores_avx2(stacked, headDim, rows, k, ldkv, n, headDim, scores, tile, 1, &keys);
    } else
#endif
        kv_attention_scores_portable(stacked, headDim, rows, k, ldkv, n, headDim, scores, tile, 1);
    // The softmax step two rows at a time (kv_exp_sub_sum_pair: their exponentials overlap).
    for (ptrdiff_t r = 0; r < rows; r += 2) {
        const ptrdiff_t count = rows - r < 2 ? rows - r : 2;
        ptrdiff_t live[2] = {0, 0};
        float top[2] = {0, 0}, sum[2] = {0, 0};
        for (ptrdiff_t u = 0; u < count; u++) {
            live[u] = firstPosition + (r + u) % positions + 1 - start;   // causal: keys up to the query's own
            live[u] = live[u] < 0 ? 0 : live[u] > n ? n : live[u];
            if (live[u] > 0) {
                float tileMax = kv_max(scores + (r + u) * tile, live[u]), old = stats[2 * (r + u)];
                top[u] = old > tileMax ? old : tileMax;
            }
        }
        if (count == 2 && live[0] > 0 && live[1] > 0)
            kv_exp_sub_sum_pair(scores + r * tile, live[0], top[0], scores + (r + 1) * tile, live[1], top[1], sum);
        else
            for (ptrdiff_t u = 0; u < count; u++)
                if (live[u] > 0) sum[u] = kv_exp_sub_sum(scores + (r + u) * tile, live[u], top[u]);
        for (ptrdiff_t u = 0; u < count; u++) {
            float *stat = stats + 2 * (r + u), old = stat[0];
            if (live[u] > 0) {
                if (top[u] > old && stat[1] > 0) {   // earlier keys were weighed against a smaller maximum
                    float factor = expf(old - top[u]), *out = o + (r + u) * ldo;
                    stat[1] *= factor;
                    for (ptrdiff_t c = 0; c < headDim; c++) out[c] *= factor;
                }
                stat[0] = top[u];
                stat[1] += sum[u];
            }
            if (live[u] < n) memset(scores + (r + u) * tile + live[u], 0, (size_t)(n - live[u]) * sizeof(float));
        }
    }
#if KV_X86
    if (avx2 && wide && rows >= TRANSPOSED_FROM_ROWS && __atomic_load_n(&value_chunks, __ATOMIC_RELAXED)) {
        // Every block of output rows reads the head's value rows again, and in the cache they lie a
        // whole K/V row apart (1 KB on base): 128 of them fall into a sixteenth of L1's sets and do
        // not stay there; VALUE_CHUNK of them do. So the AVX-512 body takes the tile's keys a chunk
        // at a time, every block of rows over each (its outputs stored and loaded again between
        // chunks, the same bits). On an Emerald Rapids (Benchmarks/harness/attend-keys.c, one core,
        // alternating) 11 / 16 / 30 new tokens over 1,536 keys took 0.95 / 0.96 / 0.98x the time of
        // copying the rows dense first, as the AVX2 body does; chunks of 16, 48 or 64 keys less.
        const ptrdiff_t chunks = (n + VALUE_CHUNK - 1) / VALUE_CHUNK;
        ahead_t values = ahead_over(valuesNext, ahead, weighted_steps_x86(rows, headDim, wide) * chunks);
        for (ptrdiff_t j = 0; j < n; j += VALUE_CHUNK)
            weighted_rows_x86(o, ldo, rows, scores + j, tile, v + j * ldkv, ldkv, n - j < VALUE_CHUNK ? n - j : VALUE_CHUNK,
                              headDim, 1, &values, wide);
        return;
    }
    if (avx2) {
        ahead_t values = ahead_over(valuesNext, ahead, weighted_steps_x86(rows, headDim, wide));
        const float *valueRows = v;
        ptrdiff_t ldv = ldkv;
        if (rows >= TRANSPOSED_FROM_ROWS) {
            // The value rows' L1 conflicts (above), here avoided by copying them dense once (into
            // the transposed keys' room, free by now): on an Emerald Rapids, 11 new tokens'
            // attention over 1,536 keys on one core took 0.89x the time. (Chunks measured no
            // better on the AVX2 body; the AVX-512 body copies too where value_chunks is off.)
            copy_rows(transposed, headDim, v, ldkv, n, headDim);
            valueRows = transposed, ldv = headDim;
        }
        weighted_rows_x86(o, ldo, rows, scores, tile, valueRows, ldv, n, headDim, 1, &values, wide);
        return;
    }
#endif
    kv_weighted_rows_add_portable(o, ldo, rows, scores, tile, v, ldkv, n, headDim);
}

void kv_attend_keys(const float *q, ptrdiff_t ldq, ptrdiff_t positions, ptrdiff_t group, ptrdiff_t kvHeads,
                    ptrdiff_t headDim, ptrdiff_t firstPosition, const float *k, const float *v, ptrdiff_t ldkv,
                    ptrdiff_t from, ptrdiff_t to, ptrdiff_t through, int fetched, ptrdiff_t tile, float scale, float *work,
                    float *stats, ptrdiff_t statsHeadStride, float *o, ptrdiff_t ldo, ptrdiff_t oHeadStride) {
    ptrdiff_t rows = group * positions;
    float *scores = work + kvHeads * rows * headDim, *transposed = scores + rows * tile;
    for (ptrdiff_t h = 0; h < kvHeads; h++)
        for (ptrdiff_t r = 0; r < rows; r++) {   // row r: position r % positions of the head's query head r / positions, scaled
            const float *src = q + (r % positions) * ldq + (h * group + r / positions) * headDim;
            float *dst = work + (h * rows + r) * headDim, *stat = stats + h * statsHeadStride + 2 * r;
            for (ptrdiff_t c = 0; c < headDim; c++) dst[c] = scale * src[c];
            stat[0] = -INFINITY;
            stat[1] = 0;
            memset(o + h * oHeadStride + r * ldo, 0, (size_t)headDim * sizeof(float));
        }
    for (ptrdiff_t start = from; start < to; start += tile) {   // each tile's rows are read whole, for every head
        ptrdiff_t n = to - start < tile ? to - start : tile, following = through - start - n < tile ? through - start - n : tile;
        // The next tile's key and value rows (whole rows: every head's columns) stream in while
        // this one computes, each head taking its share.
        // A first tile nobody fetched (`fetched` 0): while its first head computes, that head
        // fetches the tile's whole rows (the other heads' columns arrive before they are read, the
        // first head's own about when it reads them), and the other heads share the next tile. On a
        // Zen 1, one core starting cold on 492 keys: 4 new tokens' attention lost 0.024 ms to DRAM
        // against 0.040 without, one token's 0.042 against 0.055.
        int cold = start == from && !fetched && kvHeads > 1;
        ptrdiff_t sharing = cold ? kvHeads - 1 : kvHeads;
        ptrdiff_t bytes = following * ldkv * (ptrdiff_t)sizeof(float), share = (bytes + sharing - 1) / sharing;
        for (ptrdiff_t h = 0; h < kvHeads; h++) {
            const char *keysNext, *valuesNext;
            ptrdiff_t mine;
            if (cold && h == 0) {
                keysNext = (const char *)(k + start * ldkv);
                valuesNext = (const char *)(v + start * ldkv);
                mine = n * ldkv * (ptrdiff_t)sizeof(float);
            } else {
                ptrdiff_t turn = cold ? h - 1 : h, skip = turn * share < bytes ? turn * share : bytes;
                keysNext = (const char *)(k + (start + n) * ldkv) + skip;
                valuesNext = (const char *)(v + (start + n) * ldkv) + skip;
                mine = bytes - skip < share ? bytes - skip : share;
            }
            attend_tile(work + h * rows * headDim, rows, positions, headDim, firstPosition, k + start * ldkv + h * headDim,
                        v + start * ldkv + h * headDim, ldkv, start, n, tile, scores, transposed,
                        stats + h * statsHeadStride, o + h * oHeadStride, ldo, keysNext, valuesNext, mine);
        }
    }
}

// The merge's two row operations: dst += src * weight (one rounding per element, as fmaf) and
// dst *= factor. The AVX2 body does eight lanes at a time with the same single-rounding operations,
// so both bodies give the same bits. Compiled for the baseline instruction set, fmaf is a libm call
// per element: on a Zen 5 that made the merge of 8 new tokens' four parts 45 us of a layer's 124.
static void add_scaled_portable(float *dst, const float *src, float weight, ptrdiff_t n) {
    for (ptrdiff_t c = 0; c < n; c++) dst[c] = fmaf(src[c], weight, dst[c]);
}

static void scale_portable(float *dst, float factor, ptrdiff_t n) {
    for (ptrdiff_t c = 0; c < n; c++) dst[c] *= factor;
}

#if KV_X86
KV_AVX2 static void add_scaled_avx2(float *dst, const float *src, float weight, ptrdiff_t n) {
    __m256 w = _mm256_set1_ps(weight);
    ptrdiff_t c = 0;
    for (; c + 8 <= n; c += 8) _mm256_storeu_ps(dst + c, _mm256_fmadd_ps(_mm256_loadu_ps(src + c), w, _mm256_loadu_ps(dst + c)));
    for (; c < n; c++) dst[c] = fmaf(src[c], weight, dst[c]);
}

KV_AVX2 static void scale_avx2(float *dst, float factor, ptrdiff_t n) {
    __m256 f = _mm256_set1_ps(factor);
    ptrdiff_t c = 0;
    for (; c + 8 <= n; c += 8) _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_loadu_ps(dst + c), f));
    for (; c < n; c++) dst[c] *= factor;
}
#endif

static void attend_merge(int avx2, ptrdiff_t parts, const float *stats, ptrdiff_t statsPartStride, const float *o,
                         ptrdiff_t oPartStride, ptrdiff_t ldo, ptrdiff_t rows, ptrdiff_t headDim, ptrdiff_t blockRows,
                         float *out, ptrdiff_t ldout) {
    void (*add_scaled)(float *, const float *, float, ptrdiff_t) = add_scaled_portable;
    void (*scale)(float *, float, ptrdiff_t) = scale_portable;
#if KV_X86
    if (avx2) { add_scaled = add_scaled_avx2; scale = scale_avx2; }
#else
    (void)avx2;
#endif
    for (ptrdiff_t r = 0; r < rows; r++) {
        float top = -INFINITY, total = 0;
        for (ptrdiff_t part = 0; part < parts; part++) {
            float m = stats[part * statsPartStride + 2 * r];
            top = m > top ? m : top;
        }
        float *dst = out + (r % blockRows) * ldout + (r / blockRows) * headDim;
        memset(dst, 0, (size_t)headDim * sizeof(float));
        for (ptrdiff_t part = 0; part < parts; part++) {
            const float *stat = stats + part * statsPartStride + 2 * r, *src = o + part * oPartStride + r * ldo;
            if (stat[1] == 0) continue;   // the part holds no key this row sees
            float weight = parts == 1 ? 1 : expf(stat[0] - top);
            total += stat[1] * weight;
            add_scaled(dst, src, weight, headDim);
        }
        scale(dst, 1 / total, headDim);
    }
}

void kv_attend_merge(ptrdiff_t parts, const float *stats, ptrdiff_t statsPartStride, const float *o,
                     ptrdiff_t oPartStride, ptrdiff_t ldo, ptrdiff_t rows, ptrdiff_t headDim, ptrdiff_t blockRows,
                     float *out, ptrdiff_t ldout) {
    attend_merge(kv_uses_avx2(), parts, stats, statsPartStride, o, oPartStride, ldo, rows, headDim, blockRows, out, ldout);
}

void kv_attend_merge_portable(ptrdiff_t parts, const float *stats, ptrdiff_t statsPartStride, const float *o,
                              ptrdiff_t oPartStride, ptrdiff_t ldo, ptrdiff_t rows, ptrdiff_t headDim, ptrdiff_t blockRows,
                              float *out, ptrdiff_t ldout) {
    attend_merge(0, parts, stats, statsPartStride, o, oPartStride, ldo, rows, headDim, blockRows, out, ldout);
}
