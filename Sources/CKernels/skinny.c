// Projections of a few rows of activations (a short prefill, a decode step) by weights stored
// [out][in]: y[t][n] = alpha * dot(x[t], w[n]) + beta * y[t][n]. OpenBLAS's sgemm packs both
// operands and is tuned for many rows; with few, each weight row is better streamed once and
// dotted with every activation row while it sits in L1. Weights come as float32 or as IEEE half
// (half the bytes to stream; converted to float in registers).
//
// Every output element gets the same arithmetic whichever tile computes it (eight lane sums
// accumulated in k order, then one fixed reduction, then the scalar tail), so results do not
// depend on how the rows are split into tiles or bands.

#include "CKernels.h"
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#define KV_X86 1
#include <immintrin.h>
#include "prefetch.h"
#else
#define KV_X86 0
#endif

// alpha · dot, plus beta · y when beta is not 0: one rounding per operation in every body. (Left to
// the compiler, `alpha * dot + beta * *y` became an FMA of one product or of the other depending on
// the function it was inlined into; finish4x4_512's vector form needs one definite order to match.)
static inline float finish(float dot, float alpha, float beta, const float *y) {
#pragma clang fp contract(off)
    return beta == 0 ? alpha * dot : alpha * dot + beta * *y;
}

float kv_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, bits;
    if (exponent == 0) {   // zero or subnormal: mantissa * 2^-24, exact in float
        float magnitude = (float)mantissa * 0x1p-24f;
        return sign ? -magnitude : magnitude;
    }
    bits = sign | (exponent == 31 ? 0x7f800000 | mantissa << 13 : (exponent + 112) << 23 | mantissa << 13);
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

#if KV_X86
// The same reduction as the portable body's: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
__attribute__((target("avx2,fma"), always_inline)) static inline float reduce8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));   // l + (l+4)
    __m128 pairs = _mm_add_ps(s, _mm_movehl_ps(s, s));                                  // s0+s2, s1+s3
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}
#endif

#include <stdlib.h>
static int kv_prefetch_rows = 8;
__attribute__((constructor)) static void read_prefetch_env(void) {
    const char *v = getenv("KVSESSION_PREFETCH");
    if (v) kv_prefetch_rows = atoi(v);
}

#define KV_PACK_GROUP 4

_Static_assert(KV_PACK_GROUP == 4, "tiles of four rows must each fill one packed group");

ptrdiff_t kv_pack_group(void) { return KV_PACK_GROUP; }

// Where rows live, per inclusion of the body: SKINNY_PACKED 0 for plain rows (row n at
// w + n * ldw), 1 for packed ones (kv_pack8_f32): the group of G = KV_PACK_GROUP rows holding row n
// starts at w + (n & ~(G-1)) * ldw (ldw == k); its chunk c holds the G rows' elements 8c ..< 8c+8,
// row after row, and the rows' last k % 8 elements follow. The choice is a constant, folded away.
// Groups of four: a tile of four rows (every tile of several activation rows) then reads one
// contiguous run, and the eight-row decode tile two runs side by side. Measured on Zen 1, two cores
// streaming 400 MB: one activation row 28 GB/s packed by four against 25 plain (the plain streaming
// sum: 28-29); 2-16 rows even with plain rows. Groups of eight made decode one run too, but left
// tiles of four rows reading half of every chunk, 5-15% slower for 4-16 rows.
#define SKINNY_GROUP (SKINNY_PACKED ? KV_PACK_GROUP : 1)
#define SKINNY_GROUP_START(w, n, ldw) ((w) + ((n) & ~(ptrdiff_t)(KV_PACK_GROUP - 1)) * (ldw))
#define SKINNY_ROW(w, n, ldw) \
    (SKINNY_PACKED ? SKINNY_GROUP_START(w, n, ldw) + ((n) & (KV_PACK_GROUP - 1)) * 8 : (w) + (n) * (ldw))
#define SKINNY_NEXTROW(ldw) (SKINNY_PACKED ? 8 : (ldw))
#define SKINNY_AT(row, i) ((row) + (i) * SKINNY_GROUP)
#define SKINNY_TAILROW(w, n, ldw, k) \
    (SKINNY_PACKED ? SKINNY_GROUP_START(w, n, ldw) + (KV_PACK_GROUP - 1) * ((k) - (k) % 8) \
                         + ((n) & (KV_PACK_GROUP - 1)) * ((k) % 8) \
                   : (w) + (n) * (ldw))

#define SKINNY_W float
#define SKINNY_SCALAR(p) (*(p))
#define SKINNY_LOAD8(p) _mm256_loadu_ps(p)
#define SKINNY_TAIL(p) (*(p))
#define SKINNY_TARGET "avx2,fma"
#define SKINNY_CONVERTS 0
#define SKINNY_PACKED 0
#define SKINNY_NAME(n) n##_f32
#include "skinny_body.h"
#undef SKINNY_PACKED
#undef SKINNY_NAME
#define SKINNY_PACKED 1
#define SKINNY_NAME(n) n##_f32_packed
#include "skinny_body.h"
#undef SKINNY_PACKED
#undef SKINNY_NAME
#undef SKINNY_W
#undef SKINNY_SCALAR
#undef SKINNY_LOAD8
#undef SKINNY_TAIL
#undef SKINNY_TARGET
#undef SKINNY_CONVERTS

#define SKINNY_W uint16_t
#define SKINNY_SCALAR(p) kv_half_to_float(*(p))
#define SKINNY_LOAD8(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define SKINNY_TAIL(p) _cvtsh_ss(*(p))
#define SKINNY_TARGET "avx2,fma,f16c"
#define SKINNY_CONVERTS 1
#define SKINNY_PACKED 0
#define SKINNY_NAME(n) n##_f16
#include "skinny_body.h"
#undef SKINNY_PACKED
#undef SKINNY_NAME
#define SKINNY_PACKED 1
#define SKINNY_NAME(n) n##_f16_packed
#include "skinny_body.h"

#if KV_X86
__attribute__((target("avx2,f16c"))) static void halfs_to_floats_f16c(float *dst, const uint16_t *src, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(src[i]);
}

// Eight sums, so that neither the additions' latency nor the loop hides the conversions' cost.
__attribute__((target("avx2,f16c"))) static float sum_halfs_f16c(const uint16_t *w, ptrdiff_t n) {
    __m256 a[8];
    for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
    ptrdiff_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 8; j++) a[j] = _mm256_add_ps(a[j], _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 8 * j))));
    for (int j = 1; j < 8; j++) a[0] = _mm256_add_ps(a[0], a[j]);
    float lanes[8], sum = 0;
    _mm256_storeu_ps(lanes, a[0]);
    for (int l = 0; l < 8; l++) sum += lanes[l];
    return sum + kv_sum_halfs_portable(w + i, n - i);
}

static int has_f16c = 0;
// Whether decode steps on finite packed halfs take split8x1: by default on the CPUs it was measured
// to help, the Zen 1 family (F16C on 128-bit units); KVSESSION_HALF_SPLIT=0 or 1 chooses.
static int split_tile = 0;
__attribute__((constructor)) static void detect_f16c(void) {
    __builtin_cpu_init();
    has_f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    const char *choice = getenv("KVSESSION_HALF_SPLIT");
    split_tile = choice ? strcmp(choice, "0") != 0 : kv_amd_zen_generation() == 1;
}

// The decode tile of kv_skinny_gemm_f16_packed_finite: eight rows (two packed groups, from row n)
// by one activation row, as tile8x1_f16_packed, but only the first group converts through F16C.
// The second converts with integer operations: a half placed in the top 16 bits of a 32-bit lane,
// shifted right arithmetically by 3 and masked to sign | 000 | 5 exponent bits | 10 mantissa bits |
// 13 zero bits, is the float h * 2^-112, exactly (a normal half's exponent moves by the difference
// of the biases, a subnormal half becomes a subnormal float, zero stays zero); against xs = x * 2^112
// (exact while |x| < 2^16) each product is x * h exactly, so every FMA gives F16C's bits. An
// infinity or NaN would become a finite float: hence weights known to hold none.
// The lanes of a 256-bit load hold two rows' chunks side by side: unpacking its low and high words
// gives [row a: elements 0-3 | row b: 0-3] and [a: 4-7 | b: 4-7], multiplied by xs's elements
// 0-3 and 4-7 broadcast to both halves; regrouping the accumulators' halves at the end gives each
// row its eight lane sums, accumulated in k order as in every other tile.
// Why: on a Zen 1 the FMAs and F16C's conversions share the 128-bit FP units; the integer
// operations spread over others. One core in L2: 7.2 G halfs/s against 6.2 for all rows through
// F16C; a decode step's projections from DRAM on two cores: 1.07-1.10x (alternating in one process).
__attribute__((target("avx2,fma,f16c"))) static void split8x1(const float *x, const float *xs, const uint16_t *w,
                                                              ptrdiff_t n, ptrdiff_t k, float *y, float alpha,
                                                              float beta, const char *ahead) {
    ptrdiff_t end = k - k % 8;
    const uint16_t *first = SKINNY_GROUP_START(w, n, k), *second = SKINNY_GROUP_START(w, n + 4, k);
    if (!ahead) ahead = (const char *)first;   // no branch in the loop: prefetch own bytes
    const __m256i zero = _mm256_setzero_si256(), mask = _mm256_set1_epi32((int)0x8FFFE000);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b45lo = a0, b45hi = a0, b67lo = a0, b67hi = a0;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), lo = _mm256_broadcast_ps((const __m128 *)(xs + i)),
               hi = _mm256_broadcast_ps((const __m128 *)(xs + i + 4));
        KV_PREFETCH(ahead + i * 16);
        KV_PREFETCH(ahead + i * 16 + 64);
        const uint16_t *c = first + i * 4, *d = second + i * 4;
        a0 = _mm256_fmadd_ps(v, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)c)), a0);
        a1 = _mm256_fmadd_ps(v, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(c + 8))), a1);
        a2 = _mm256_fmadd_ps(v, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(c + 16))), a2);
        a3 = _mm256_fmadd_ps(v, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(c + 24))), a3);
        __m256i h45 = _mm256_loadu_si256((const __m256i *)d), h67 = _mm256_loadu_si256((const __m256i *)(d + 16));
#define KV_SCALED_HALFS(words) _mm256_castsi256_ps(_mm256_and_si256(_mm256_srai_epi32(words, 3), mask))
        b45lo = _mm256_fmadd_ps(lo, KV_SCALED_HALFS(_mm256_unpacklo_epi16(zero, h45)), b45lo);
        b45hi = _mm256_fmadd_ps(hi, KV_SCALED_HALFS(_mm256_unpackhi_epi16(zero, h45)), b45hi);
        b67lo = _mm256_fmadd_ps(lo, KV_SCALED_HALFS(_mm256_unpacklo_epi16(zero, h67)), b67lo);
        b67hi = _mm256_fmadd_ps(hi, KV_SCALED_HALFS(_mm256_unpackhi_epi16(zero, h67)), b67hi);
#undef KV_SCALED_HALFS
    }
    __m256 acc[8] = {a0, a1, a2, a3, _mm256_permute2f128_ps(b45lo, b45hi, 0x20), _mm256_permute2f128_ps(b45lo, b45hi, 0x31),
                     _mm256_permute2f128_ps(b67lo, b67hi, 0x20), _mm256_permute2f128_ps(b67lo, b67hi, 0x31)};
    for (int j = 0; j < 8; j++) y[j] = finish(tail_f16_packed(x, w, n + j, k, k, reduce8(acc[j])), alpha, beta, y + j);
}

// xs = x * 2^112 for split8x1; false when some |x| is not below 2^16 (the product would not be exact).
__attribute__((target("avx2"))) static int scaled_for_split(float *xs, const float *x, ptrdiff_t k) {
    int fits = 1;
    for (ptrdiff_t i = 0; i < k; i++) {
        fits &= fabsf(x[i]) < 0x1p16f;   // false for NaN too
        xs[i] = x[i] * 0x1p112f;
    }
    return fits;
}

// AVX-512 tiles of several activation rows on packed weights. In a packed group two rows' chunks
// of eight sit side by side, so one 512-bit vector holds [row a: 8 lanes | row b: 8 lanes], and the
// activation chunk broadcast to both halves multiplies both rows with one FMA: each half is one of
// the AVX2 body's eight-lane accumulators, fed the same products in the same k order, reduced by the
// same reduce8 and finished by the same tail. So every element gets the AVX2 body's bits, and
// vectors twice as wide halve the instructions where the tiles are compute-bound (short prefills:
// four weights' FMAs per activation row and weight on a CPU with 512-bit FMA units).
#define KV_512_TARGET "avx2,fma,f16c,avx512f,avx512dq,avx512vl"
// The most activation rows a tile takes: 24 accumulators, two weight vectors and a broadcast in 32 registers.
#define KV_512_ROWS 12
_Static_assert(KV_512_ROWS % 4 == 0, "group_dots512 reduces whole fours of activation rows");
#define KV_512_INLINE __attribute__((target(KV_512_TARGET), always_inline)) static inline

// Sixteen weights at p (floats, or halfs converted exactly): rows a and b's chunk of a packed group.
KV_512_INLINE __m512 load_row_pair(const char *p, int halfs) {
    return halfs ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)) : _mm512_loadu_ps((const float *)p);
}

// reduce8 of both halves of lo[u] and of hi[u] for four activation rows u at once: out[j * stride + u]
// for weight row j (lo's halves rows 0 and 1, hi's rows 2 and 3). Each sum takes reduce8's additions
// with its operands in the same order (lanes l + l+4, then those s0 + s2 and s1 + s3, then the two), so
// the bits are reduce8's, in 21 instructions for sixteen sums where reduce8 takes about 100 (on an
// Emerald Rapids VM, f32 passes of 12-64 new tokens on base 1.5-4% faster, alternating binaries).
KV_512_INLINE __m512 sums4x4_512(const __m512 lo[4], const __m512 hi[4]) {
    __m512 s[4];   // per activation row: quarter j holds weight row j's four sums l + l+4
#pragma clang loop unroll(full)
    for (int u = 0; u < 4; u++)
        s[u] = _mm512_add_ps(_mm512_shuffle_f32x4(lo[u], hi[u], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(lo[u], hi[u], _MM_SHUFFLE(3, 1, 3, 1)));
    // Per quarter: s0 + s2 and s1 + s3 of two activation rows side by side.
    __m512 p01 = _mm512_add_ps(_mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 p23 = _mm512_add_ps(_mm512_shuffle_ps(s[2], s[3], _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_ps(s[2], s[3], _MM_SHUFFLE(3, 2, 3, 2)));
    // Per quarter (weight row): the four activation rows' sums.
    return _mm512_add_ps(_mm512_shuffle_ps(p01, p23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(p01, p23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The sixteen sums of sums4x4_512 stored to out[j * stride + u].
KV_512_INLINE void reduce4x4_512(const __m512 lo[4], const __m512 hi[4], float *out, ptrdiff_t stride) {
    __m512 dots = sums4x4_512(lo, hi);
    _mm_storeu_ps(out, _mm512_castps512_ps128(dots));
    _mm_storeu_ps(out + stride, _mm512_extractf32x4_ps(dots, 1));
    _mm_storeu_ps(out + 2 * stride, _mm512_extractf32x4_ps(dots, 2));
    _mm_storeu_ps(out + 3 * stride, _mm512_extractf32x4_ps(dots, 3));
}

// The sixteen sums of sums4x4_512 finished and stored where they belong, for a k with no tail (a
// multiple of 8): activation row u's four outputs are consecutive, y[u * ldy + j], so one permute
// turns the vector around and each row takes one 128-bit operation and store, for `count` (1...4)
// rows. The arithmetic is finish()'s, one rounding per operation, which the on/off bit tests hold
// it to (with an alpha and beta whose products round). Where each
// element went through finish() one by one, 48 scalar finishes for a tile of twelve rows took about
// a tenth of its instructions, on the ports its FMAs need.
KV_512_INLINE void finish4x4_512(const __m512 lo[4], const __m512 hi[4], int count, float *y, ptrdiff_t ldy,
                                 float alpha, float beta) {
    const __m512i rows = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512 t = _mm512_permutexvar_ps(rows, sums4x4_512(lo, hi));   // quarter u: row u's four outputs
    const __m128 a = _mm_set1_ps(alpha), b = _mm_set1_ps(beta);
    __m128 v[4] = {_mm512_castps512_ps128(t), _mm512_extractf32x4_ps(t, 1), _mm512_extractf32x4_ps(t, 2),
                   _mm512_extractf32x4_ps(t, 3)};
    for (int u = 0; u < count; u++) {
        float *out = y + u * ldy;
        __m128 r = beta == 0 ? _mm_mul_ps(a, v[u]) : _mm_add_ps(_mm_mul_ps(a, v[u]), _mm_mul_ps(b, _mm_loadu_ps(out)));
        _mm_storeu_ps(out, r);
    }
}

// R activation rows (1...KV_512_ROWS, a constant once inlined) by the packed group of four weight rows at
// `group` (elements of `size` bytes): dots[j][t] the reduced eight lane sums of weight row j and
// activation row t, before the tail; or, with `y` (k a multiple of 8), the finished outputs stored
// at y[t * ldy + j] (finish4x4_512). Prefetches `lines` cache lines from `ahead` spread over its steps.
KV_512_INLINE void group_dots512(const int R, const int halfs, const float *x, ptrdiff_t ldx, const char *group,
                                 ptrdiff_t k, float dots[4][KV_512_ROWS], const char *ahead, ptrdiff_t lines,
                                 float *y, ptrdiff_t ldy, float alpha, float beta) {
    const ptrdiff_t size = halfs ? 2 : 4, end = k - k % 8, steps = end > 8 ? end / 8 : 1;
    ptrdiff_t spread = 0;
    __m512 lo[KV_512_ROWS], hi[KV_512_ROWS];   // rows 0-1 and rows 2-3, per activation row
#pragma clang loop unroll(full)
    for (int t = 0; t < R; t++) lo[t] = hi[t] = _mm512_setzero_ps();
    for (ptrdiff_t i = 0; i < end; i += 8) {
        for (spread += lines; spread >= steps; spread -= steps, ahead += 64) KV_PREFETCH(ahead);
        const char *chunk = group + 4 * i * size;
        __m512 w01 = load_row_pair(chunk, halfs), w23 = load_row_pair(chunk + 16 * size, halfs);
#pragma clang loop unroll(full)
        for (int t = 0; t < R; t++) {
            __m512 v = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + t * ldx + i));
            lo[t] = _mm512_fmadd_ps(v, w01, lo[t]);
            hi[t] = _mm512_fmadd_ps(v, w23, hi[t]);
        }
    }
#pragma clang loop unroll(full)
    for (int t = R; t < (R + 3) / 4 * 4; t++) lo[t] = hi[t] = _mm512_setzero_ps();   // whole fours (KV_512_ROWS is one)
    if (y) {
#pragma clang loop unroll(full)
        for (int t = 0; t < R; t += 4) finish4x4_512(lo + t, hi + t, R - t < 4 ? R - t : 4, y + t * ldy, ldy, alpha, beta);
        return;
    }
#pragma clang loop unroll(full)
    for (int t = 0; t < R; t += 4) reduce4x4_512(lo + t, hi + t, &dots[0][t], KV_512_ROWS);
}

// group_dots512 for each R and element type as a function of its own: its loop then has every
// register to itself (inlined into the driver, clang reloaded the row pointers from the stack).
#define KV_GROUP_DOTS(R, halfs, name)                                                                     \
    __attribute__((target(KV_512_TARGET), noinline)) static void name(                                    \
        const float *x, ptrdiff_t ldx, const char *group, ptrdiff_t k, float dots[4][KV_512_ROWS],         \
        const char *ahead, ptrdiff_t lines, float *y, ptrdiff_t ldy, float alpha, float beta) {           \
        group_dots512(R, halfs, x, ldx, group, k, dots, ahead, lines, y, ldy, alpha, beta);               \
    }
KV_GROUP_DOTS(1, 0, dots512_f32_1) KV_GROUP_DOTS(2, 0, dots512_f32_2) KV_GROUP_DOTS(3, 0, dots512_f32_3)
KV_GROUP_DOTS(4, 0, dots512_f32_4) KV_GROUP_DOTS(5, 0, dots512_f32_5) KV_GROUP_DOTS(6, 0, dots512_f32_6)
KV_GROUP_DOTS(7, 0, dots512_f32_7) KV_GROUP_DOTS(8, 0, dots512_f32_8) KV_GROUP_DOTS(9, 0, dots512_f32_9)
KV_GROUP_DOTS(10, 0, dots512_f32_10) KV_GROUP_DOTS(11, 0, dots512_f32_11) KV_GROUP_DOTS(12, 0, dots512_f32_12)
KV_GROUP_DOTS(1, 1, dots512_f16_1) KV_GROUP_DOTS(2, 1, dots512_f16_2) KV_GROUP_DOTS(3, 1, dots512_f16_3)
KV_GROUP_DOTS(4, 1, dots512_f16_4) KV_GROUP_DOTS(5, 1, dots512_f16_5) KV_GROUP_DOTS(6, 1, dots512_f16_6)
KV_GROUP_DOTS(7, 1, dots512_f16_7) KV_GROUP_DOTS(8, 1, dots512_f16_8) KV_GROUP_DOTS(9, 1, dots512_f16_9)
KV_GROUP_DOTS(10, 1, dots512_f16_10) KV_GROUP_DOTS(11, 1, dots512_f16_11) KV_GROUP_DOTS(12, 1, dots512_f16_12)
#undef KV_GROUP_DOTS
typedef void (*group_dots512_fn)(const float *, ptrdiff_t, const char *, ptrdiff_t, float[4][KV_512_ROWS], const char *, ptrdiff_t,
                                 float *, ptrdiff_t, float, float);
static const group_dots512_fn group_dots512_by_rows[2][KV_512_ROWS] = {
    {dots512_f32_1, dots512_f32_2, dots512_f32_3, dots512_f32_4, dots512_f32_5, dots512_f32_6,
     dots512_f32_7, dots512_f32_8, dots512_f32_9, dots512_f32_10, dots512_f32_11, dots512_f32_12},
    {dots512_f16_1, dots512_f16_2, dots512_f16_3, dots512_f16_4, dots512_f16_5, dots512_f16_6,
     dots512_f16_7, dots512_f16_8, dots512_f16_9, dots512_f16_10, dots512_f16_11, dots512_f16_12},
};

// The most activation rows a tile of two groups takes: 24 accumulators, four weight vectors and a
// broadcast.
#define KV_512_PAIR_ROWS 6
// The columns of a pair tile's dots: its rows rounded up to whole fours, which reduce4x4_512 reduces.
#define KV_512_PAIR_COLUMNS 8
// The fewest activation rows that take tiles of two groups.
#define KV_512_PAIR_FROM 3

// group_dots512 over two consecutive groups (eight weight rows) at once: four weight vectors per
// step feed 4R FMAs, so a tile of few activation rows still has enough independent accumulators to
// keep the FMA units busy (one group and two rows give four, and wait on the FMA latency), and
// each activation chunk is loaded once per eight weight rows. dots[j][t] as group_dots512's, for
// weight rows j of the pair. Each prefetch at `ahead` has a twin at `ahead + jump` when jump is not 0
// (the two groups' streams, each `lead` bytes ahead: packed512). With `y` (k a multiple of 8) the
// finished outputs are stored at y[t * ldy + j] instead (finish4x4_512, as group_dots512 does).
KV_512_INLINE void pair_dots512(const int R, const int halfs, const float *x, ptrdiff_t ldx, const char *group,
                                ptrdiff_t k, float dots[2 * KV_PACK_GROUP][KV_512_PAIR_COLUMNS], const char *ahead,
                                ptrdiff_t lines, ptrdiff_t jump, float *y, ptrdiff_t ldy, float alpha, float beta) {
    const ptrdiff_t size = halfs ? 2 : 4, end = k - k % 8, steps = end > 8 ? end / 8 : 1, second = KV_PACK_GROUP * k * size;
    ptrdiff_t spread = 0;
    __m512 acc[KV_512_PAIR_COLUMNS][4];   // per activation row: weight rows 0-1, 2-3, 4-5, 6-7
#pragma clang loop unroll(full)
    for (int t = 0; t < R; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
    for (ptrdiff_t i = 0; i < end; i += 8) {
        for (spread += lines; spread >= steps; spread -= steps, ahead += 64) {
            KV_PREFETCH(ahead);
            if (jump) KV_PREFETCH(ahead + jump);
        }
        const char *chunk = group + 4 * i * size;
        __m512 w[4] = {load_row_pair(chunk, halfs), load_row_pair(chunk + 16 * size, halfs),
                       load_row_pair(chunk + second, halfs), load_row_pair(chunk + second + 16 * size, halfs)};
#pragma clang loop unroll(full)
        for (int t = 0; t < R; t++) {
            __m512 v = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + t * ldx + i));
#pragma clang loop unroll(full)
            for (int j = 0; j < 4; j++) acc[t][j] = _mm512_fmadd_ps(v, w[j], acc[t][j]);
        }
    }
#pragma clang loop unroll(full)
    for (int t = R; t < (R + 3) / 4 * 4; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
#pragma clang loop unroll(full)
    for (int t = 0; t < R; t += 4) {
        __m512 lo[4], hi[4];
#pragma clang loop unroll(full)
        for (int g = 0; g < 2; g++) {   // the pair's groups: weight rows 4g ..< 4g + 4
#pragma clang loop unroll(full)
            for (int u = 0; u < 4; u++) lo[u] = acc[t + u][2 * g], hi[u] = acc[t + u][2 * g + 1];
            if (y) finish4x4_512(lo, hi, R - t < 4 ? R - t : 4, y + t * ldy + 4 * g, ldy, alpha, beta);
            else reduce4x4_512(lo, hi, &dots[4 * g][t], KV_512_PAIR_COLUMNS);
        }
    }
}

#define KV_PAIR_DOTS(R, halfs, name)                                                                      \
    __attribute__((target(KV_512_TARGET), noinline)) static void name(                                    \
        const float *x, ptrdiff_t ldx, const char *group, ptrdiff_t k,                                    \
        float dots[2 * KV_PACK_GROUP][KV_512_PAIR_COLUMNS], const char *ahead, ptrdiff_t lines,               \
        ptrdiff_t jump, float *y, ptrdiff_t ldy, float alpha, float beta) {                               \
        pair_dots512(R, halfs, x, ldx, group, k, dots, ahead, lines, jump, y, ldy, alpha, beta);          \
    }
KV_PAIR_DOTS(3, 0, pair512_f32_3) KV_PAIR_DOTS(4, 0, pair512_f32_4) KV_PAIR_DOTS(5, 0, pair512_f32_5)
KV_PAIR_DOTS(6, 0, pair512_f32_6) KV_PAIR_DOTS(3, 1, pair512_f16_3) KV_PAIR_DOTS(4, 1, pair512_f16_4)
KV_PAIR_DOTS(5, 1, pair512_f16_5) KV_PAIR_DOTS(6, 1, pair512_f16_6)
#undef KV_PAIR_DOTS
typedef void (*pair_dots512_fn)(const float *, ptrdiff_t, const char *, ptrdiff_t, float[2 * KV_PACK_GROUP][KV_512_PAIR_COLUMNS],
                                const char *, ptrdiff_t, ptrdiff_t, float *, ptrdiff_t, float, float);
static const pair_dots512_fn pair_dots512_by_rows[2][KV_512_PAIR_ROWS - KV_512_PAIR_FROM + 1] = {
    {pair512_f32_3, pair512_f32_4, pair512_f32_5, pair512_f32_6},
    {pair512_f16_3, pair512_f16_4, pair512_f16_5, pair512_f16_6},
};

// Bytes of a group above which a tile of all the rows prefetches a fixed `lead` ahead of its own
// loads instead of the next group (KVSESSION_LEAD_CAP sets it, 0: never). A whole next group spread
// over this one's steps is a lead of one group: 12 KB for 768 float columns, but 45 KB for a down
// projection's 2816, most of Zen 5's 48 KB L1. There, on two cores streaming from DRAM, a lead of
// 4 KB (tiles of up to six rows) or 6 KB (more) took 1.04-1.16x and 1.12-1.26x the GB/s of float
// weights, in alternating passes, and 1.09x for two rows on halfs (pair tiles on halfs: 0.77-1.03x,
// so they keep the next pair); on groups of 768 columns fixed leads of 3-16 KB were 0.75-1.0x.
static ptrdiff_t kv_lead_cap = 16384;
// Whether more than KV_512_ROWS activation rows on float32 weights take tiles of two groups (of three
// to six rows each) instead of tiles of one group (of up to twelve). Up to twelve rows one tile
// sweeps every group and its activation rows stay in L1 from one group to the next; beyond, they
// are read again from L2 for every group, and a tile of two groups reads them once for eight weight
// rows instead of four (and does 24 FMAs for 10 loads where a one-group tile of twelve does 24 for 14). One Emerald Rapids
// core on weights in L2 (Benchmarks/harness/skinny-tile.c, alternating): 768 columns 16 / 24 / 32 /
// 64 rows at 132-137 / 142 / 142 / 142-145 GFLOP/s against 112-135 / 111-136 / 92-136 / 136-143,
// 2,816 columns 120-123 / 138-140 / 142-144 / 153-155 against 84-114 / 89-132 / 89-136 / 122-139; at
// 8 and 12 rows the one-group tile leads (136-142 and 141-148 against 114-115 and 132). Passes of 24
// / 32 / 64 new tokens on base, four alternating rounds: 1.14-1.68 / 1.09-1.60 / 0.95-1.47 of their
// roofline (both ceilings paired) against 1.66-1.87 / 1.47-1.64 / 1.34-1.49, better in three rounds
// of four. Float32 only: a pair tile on halfs converts four weight vectors for 24 FMAs, on the
// ports the FMAs need, where a one-group tile of twelve converts two, and f16 passes of 16-64 new
// tokens were slower with it in every round. By default on Emerald Rapids; elsewhere not measured
// (KVSESSION_PAIR_TILES=1 or 0 chooses).
static int kv_pair_tiles = 0;
__attribute__((constructor)) static void read_lead_cap_env(void) {
    const char *v = getenv("KVSESSION_LEAD_CAP");
    if (v) kv_lead_cap = atoi(v);
    const char *p = getenv("KVSESSION_PAIR_TILES");
    kv_pair_tiles = p ? strcmp(p, "0") != 0 : kv_intel_emerald_rapids();
}

// Packed weights (`outputs` rows of k, groups of four; float32 or `halfs`) times `rows` activation
// rows, as the AVX2 body computes them: three to six rows in one tile per two groups, other counts
// (and a lone last group) per group in tiles of at most KV_512_ROWS activation rows (balanced), each
// tile prefetching its share of the bytes read next (the next groups, or `after` for the last), or,
// for one tile over groups above kv_lead_cap, the bytes a fixed lead ahead of its own loads.
KV_512_INLINE void packed512(const int halfs, const float *x, ptrdiff_t ldx, ptrdiff_t rows, const void *w,
                             ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta,
                             const char *after, ptrdiff_t afterBytes) {
    const ptrdiff_t size = halfs ? 2 : 4, groupBytes = KV_PACK_GROUP * k * size;
    const ptrdiff_t tiles = (rows + KV_512_ROWS - 1) / KV_512_ROWS;
    const int pairs = rows >= KV_512_PAIR_FROM && rows <= KV_512_PAIR_ROWS;
    const int capped = tiles == 1 && kv_lead_cap > 0 && groupBytes > kv_lead_cap && !(halfs && pairs);
    const ptrdiff_t lead = rows <= KV_512_PAIR_ROWS ? 4096 : 6144;
    ptrdiff_t n = 0;
    // Three to six rows: one tile of all of them, two groups at a time. (Two rows measured no faster
    // as pairs; on a Zen 5, f16 passes of 4 and 6 new tokens went from 1.37 / 1.11 to 1.27 / 1.00
    // of their roofline, f32 ones no change.) With kv_pair_tiles, more than KV_512_ROWS rows too, in
    // balanced tiles of three to six, each prefetching its share of the next pair.
    const int pairsBeyond = !halfs && __atomic_load_n(&kv_pair_tiles, __ATOMIC_RELAXED) && rows > KV_512_ROWS;
    const ptrdiff_t pairTiles = pairs ? 1 : pairsBeyond ? (rows + KV_512_PAIR_ROWS - 1) / KV_512_PAIR_ROWS : 0;
    if (pairTiles)
        for (; n + 2 * KV_PACK_GROUP <= outputs; n += 2 * KV_PACK_GROUP) {
            const char *pair = (const char *)w + n * k * size;
            ptrdiff_t following = (outputs - n) / KV_PACK_GROUP - 2;   // whole groups after the pair
            following = following > 2 ? 2 : following;
            const char *next = following ? pair + 2 * groupBytes : after;
            ptrdiff_t nextBytes = following ? following * groupBytes : after ? afterBytes : 0, jump = 0;
            if (capped && pairTiles == 1 && following == 2)   // each group's stream `lead` ahead of its loads
                next = pair + lead, nextBytes = groupBytes, jump = groupBytes;   // (the second's end runs into the next pair)
            ptrdiff_t share = (nextBytes / 64 + pairTiles - 1) / pairTiles;
            for (ptrdiff_t tile = 0, t = 0; tile < pairTiles; tile++) {
                ptrdiff_t r = rows / pairTiles + (tile < rows % pairTiles);
                const float *xt = x + t * ldx;
                float dots[2 * KV_PACK_GROUP][KV_512_PAIR_COLUMNS];
                // With no tail the tile finishes and stores its outputs itself.
                pair_dots512_by_rows[halfs][r - KV_512_PAIR_FROM](xt, ldx, pair, k, dots, next ? next + 64 * tile * share : NULL,
                                                                  next ? share : 0, jump, k % 8 == 0 ? y + t * ldy + n : NULL,
                                                                  ldy, alpha, beta);
                for (int j = 0; j < 2 * KV_PACK_GROUP && k % 8 != 0; j++)
                    for (ptrdiff_t u = 0; u < r; u++) {
                        float *out = y + (t + u) * ldy + n + j, dot = dots[j][u];
                        dot = halfs ? tail_f16_packed(xt + u * ldx, (const uint16_t *)w, n + j, k, k, dot)
                                    : tail_f32_packed(xt + u * ldx, (const float *)w, n + j, k, k, dot);
                        *out = finish(dot, alpha, beta, out);
                    }
                t += r;
            }
        }
    for (; n + KV_PACK_GROUP <= outputs; n += KV_PACK_GROUP) {
        const char *group = (const char *)w + n * k * size;
        const char *next = n + 2 * KV_PACK_GROUP <= outputs ? group + groupBytes : after;
        ptrdiff_t nextBytes = n + 2 * KV_PACK_GROUP <= outputs ? groupBytes : n + KV_PACK_GROUP == outputs && after ? afterBytes : 0;
        if (capped && n + 2 * KV_PACK_GROUP <= outputs) next = group + lead;   // as many lines, `lead` ahead
        ptrdiff_t share = (nextBytes / 64 + tiles - 1) / tiles;
        for (ptrdiff_t tile = 0, t = 0; tile < tiles; tile++) {
            ptrdiff_t r = rows / tiles + (tile < rows % tiles);
            const float *xt = x + t * ldx;
            const char *ahead = next ? next + 64 * tile * share : NULL;
            ptrdiff_t lines = next ? share : 0;
            float dots[4][KV_512_ROWS];
            // With no tail the tile finishes and stores its outputs itself.
            group_dots512_by_rows[halfs][r - 1](xt, ldx, group, k, dots, ahead, lines, k % 8 == 0 ? y + t * ldy + n : NULL,
                                                ldy, alpha, beta);
            for (int j = 0; j < KV_PACK_GROUP && k % 8 != 0; j++)
                for (ptrdiff_t u = 0; u < r; u++) {
                    float *out = y + (t + u) * ldy + n + j, dot = dots[j][u];
                    dot = halfs ? tail_f16_packed(xt + u * ldx, (const uint16_t *)w, n + j, k, k, dot)
                                : tail_f32_packed(xt + u * ldx, (const float *)w, n + j, k, k, dot);
                    *out = finish(dot, alpha, beta, out);
                }
            t += r;
        }
    }
    for (; n < outputs; n++)   // a partial last group, element by element
        for (ptrdiff_t t = 0; t < rows; t++) {
            if (halfs) tile1x1_f16_packed(x + t * ldx, (const uint16_t *)w, n, k, k, y + t * ldy + n, alpha, beta);
            else tile1x1_f32_packed(x + t * ldx, (const float *)w, n, k, k, y + t * ldy + n, alpha, beta);
        }
}

__attribute__((target(KV_512_TARGET))) static void packed512_f32(const float *x, ptrdiff_t ldx, ptrdiff_t rows,
                                                                const float *w, ptrdiff_t outputs, ptrdiff_t k, float *y,
                                                                ptrdiff_t ldy, float alpha, float beta, const char *after,
                                                                ptrdiff_t afterBytes) {
    packed512(0, x, ldx, rows, w, outputs, k, y, ldy, alpha, beta, after, afterBytes);
}

__attribute__((target(KV_512_TARGET))) static void packed512_f16(const float *x, ptrdiff_t ldx, ptrdiff_t rows,
                                                                const uint16_t *w, ptrdiff_t outputs, ptrdiff_t k, float *y,
                                                                ptrdiff_t ldy, float alpha, float beta, const char *after,
                                                                ptrdiff_t afterBytes) {
    packed512(1, x, ldx, rows, w, outputs, k, y, ldy, alpha, beta, after, afterBytes);
}

// Decode (one activation row) on packed float32 weights: eight rows (two groups) from row n, four
// 512-bit accumulators each holding two rows' eight lane sums, as tile8x1_f32_packed computes them.
// Half the load and FMA instructions of tile8x1: on a Zen 5 (two cores streaming 428 MB) 47-53 GB/s,
// with the plain streaming sum, against 45-49 for tile8x1.
__attribute__((target(KV_512_TARGET))) static inline void decode512_pair(const float *x, const float *w, ptrdiff_t n,
                                                                        ptrdiff_t k, float *y, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    const float *first = w + n * k, *second = first + KV_PACK_GROUP * k;
    __m512 a01 = _mm512_setzero_ps(), a23 = a01, a45 = a01, a67 = a01;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m512 v = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + i));
        a01 = _mm512_fmadd_ps(v, _mm512_loadu_ps(first + 4 * i), a01);
        a23 = _mm512_fmadd_ps(v, _mm512_loadu_ps(first + 4 * i + 16), a23);
        a45 = _mm512_fmadd_ps(v, _mm512_loadu_ps(second + 4 * i), a45);
        a67 = _mm512_fmadd_ps(v, _mm512_loadu_ps(second + 4 * i + 16), a67);
    }
    __m256 acc[8] = {_mm512_castps512_ps256(a01), _mm512_extractf32x8_ps(a01, 1), _mm512_castps512_ps256(a23),
                     _mm512_extractf32x8_ps(a23, 1), _mm512_castps512_ps256(a45), _mm512_extractf32x8_ps(a45, 1),
                     _mm512_castps512_ps256(a67), _mm512_extractf32x8_ps(a67, 1)};
    for (int j = 0; j < 8; j++) y[n + j] = finish(tail_f32_packed(x, w, n + j, k, k, reduce8(acc[j])), alpha, beta, y + n + j);
}

// Decode over `outputs` rows: the pairs of groups of the first and second half alternately (two
// streams a thread, as the read ceiling's probe reads: on the Zen 5, 0.99-1.04x the tokens/s of one,
// median 1.01, same binary alternating in one process), then a last odd pair, then a lone last group
// (or part of one) on the AVX2 body. Every row's arithmetic is the same whatever the order.
__attribute__((target(KV_512_TARGET))) static void decode512_f32(const float *x, const float *w, ptrdiff_t outputs,
                                                                ptrdiff_t k, float *y, float alpha, float beta) {
    const ptrdiff_t pairs = outputs / (2 * KV_PACK_GROUP), half = pairs / 2, n = 2 * KV_PACK_GROUP * pairs;
    for (ptrdiff_t p = 0; p < half; p++) {
        decode512_pair(x, w, 2 * KV_PACK_GROUP * p, k, y, alpha, beta);
        decode512_pair(x, w, 2 * KV_PACK_GROUP * (half + p), k, y, alpha, beta);
    }
    if (pairs % 2) decode512_pair(x, w, n - 2 * KV_PACK_GROUP, k, y, alpha, beta);
    if (n < outputs) avx2_f32_packed(x, k, 1, w + n * k, k, outputs - n, k, y + n, outputs - n, alpha, beta, NULL, 0);
}

// Decode (one activation row) on packed weights one group of four rows at a time, front to back,
// and no software prefetch: one stream a thread, which the hardware's prefetcher follows on its own
// (kv_set_decode_one_stream). Each row gets the AVX2 body's arithmetic, as in the tiles above. On a
// Zen 4 (2-vCPU VM, base's twelve layers from DRAM on two threads, alternating in one process)
// float32 took 0.88-0.98 of the plain read's GB/s where decode512_f32's two streams took 0.71-0.84
// (read at 51-57 GB/s), 0.93-1.07 against 0.86-0.96 (read at 33-36); halfs 0.91-0.97 against the
// AVX2 eight-row tile's 0.77-0.79, and 0.97-1.02 against 0.88-0.97. Prefetching the next group
// (as the several-row tiles do) or a fixed lead ahead, into L1 or L2, was no better.
KV_512_INLINE void decode512_groups(const int halfs, const float *x, const void *w, ptrdiff_t outputs, ptrdiff_t k,
                                    float *y, float alpha, float beta) {
    const ptrdiff_t size = halfs ? 2 : 4;
    ptrdiff_t n = 0;
    for (; n + KV_PACK_GROUP <= outputs; n += KV_PACK_GROUP) {
        float dots[4][KV_512_ROWS];
        group_dots512_by_rows[halfs][0](x, k, (const char *)w + n * k * size, k, dots, NULL, 0, NULL, 0, 0, 0);
        for (int j = 0; j < KV_PACK_GROUP; j++) {
            float dot = halfs ? tail_f16_packed(x, (const uint16_t *)w, n + j, k, k, dots[j][0])
                              : tail_f32_packed(x, (const float *)w, n + j, k, k, dots[j][0]);
            y[n + j] = finish(dot, alpha, beta, y + n + j);
        }
    }
    for (; n < outputs; n++)   // a partial last group
        if (halfs) tile1x1_f16_packed(x, (const uint16_t *)w, n, k, k, y + n, alpha, beta);
        else tile1x1_f32_packed(x, (const float *)w, n, k, k, y + n, alpha, beta);
}

__attribute__((target(KV_512_TARGET))) static void decode512_groups_f32(const float *x, const float *w, ptrdiff_t outputs,
                                                                       ptrdiff_t k, float *y, float alpha, float beta) {
    decode512_groups(0, x, w, outputs, k, y, alpha, beta);
}

__attribute__((target(KV_512_TARGET))) static void decode512_groups_f16(const float *x, const uint16_t *w, ptrdiff_t outputs,
                                                                       ptrdiff_t k, float *y, float alpha, float beta) {
    decode512_groups(1, x, w, outputs, k, y, alpha, beta);
}
#undef KV_512_INLINE
#undef KV_512_TARGET

// Whether the AVX-512 bodies run (here: packed512 for several activation rows, decode512_f32
// for one on float32): by default wherever the CPU has AVX-512 F, DQ and VL; KVSESSION_AVX512=0 or 1
// chooses (kv_set_skinny_avx512 in tests). The attention (attention.c) and exponential (elementwise.c)
// bodies follow the same switch through kv_uses_skinny_avx512.
// With the AVX-512 bodies on, a decode step reads its weights as one stream a thread
// (decode512_groups: float32 and halfs) or, float32 only, as two (decode512_f32; halfs take the AVX2
// eight-row tile): one by default on the Zen 4 family, where it measured faster; the Zen 5 that
// decode512_f32 was tuned on read one stream no faster. KVSESSION_DECODE_ONE_STREAM=0 or 1 chooses.
static int use_avx512 = 0, has_avx512 = 0, decode_one_stream = 0;
__attribute__((constructor)) static void detect_avx512(void) {
    __builtin_cpu_init();
    has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")
                 && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2")
                 && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    const char *choice = getenv("KVSESSION_AVX512");
    use_avx512 = has_avx512 && (choice ? strcmp(choice, "0") != 0 : 1);
    const char *streams = getenv("KVSESSION_DECODE_ONE_STREAM");
    decode_one_stream = streams ? strcmp(streams, "0") != 0 : kv_amd_zen_generation() == 4;
}

static inline int avx512_for(ptrdiff_t rows) { return rows >= 2 && __atomic_load_n(&use_avx512, __ATOMIC_RELAXED); }
// Whether a decode step (one activation row) takes decode512_groups.
static inline int one_stream_decode(ptrdiff_t rows) {
    return rows == 1 && __atomic_load_n(&use_avx512, __ATOMIC_RELAXED) && __atomic_load_n(&decode_one_stream, __ATOMIC_RELAXED);
}
#else
static const int has_f16c = 0;
static int split_tile = 0;
static int use_avx512 = 0, decode_one_stream = 0;
static const int has_avx512 = 0;
static int kv_pair_tiles = 0;
#endif

int kv_set_skinny_pair_tiles(int on) { return __atomic_exchange_n(&kv_pair_tiles, on != 0, __ATOMIC_RELAXED); }

int kv_uses_skinny_pair_tiles(void) {
    return __atomic_load_n(&use_avx512, __ATOMIC_RELAXED) && __atomic_load_n(&kv_pair_tiles, __ATOMIC_RELAXED);
}

int kv_set_skinny_avx512(int on) { return __atomic_exchange_n(&use_avx512, has_avx512 && on != 0, __ATOMIC_RELAXED); }

int kv_has_avx512(void) { return has_avx512; }

int kv_uses_skinny_avx512(void) { return __atomic_load_n(&use_avx512, __ATOMIC_RELAXED); }

int kv_set_decode_one_stream(int on) { return __atomic_exchange_n(&decode_one_stream, on != 0, __ATOMIC_RELAXED); }

int kv_decodes_one_stream(void) { return __atomic_load_n(&decode_one_stream, __ATOMIC_RELAXED); }

int kv_set_half_split_tile(int on) { return __atomic_exchange_n(&split_tile, on != 0, __ATOMIC_RELAXED); }

ptrdiff_t kv_count_nonfinite_halfs(const uint16_t *w, ptrdiff_t n) {
    ptrdiff_t count = 0;
    for (ptrdiff_t i = 0; i < n; i++) count += (w[i] & 0x7c00) == 0x7c00;
    return count;
}

int kv_uses_f16c(void) { return has_f16c; }

void kv_skinny_gemm_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t ldw,
                             ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    portable_f32(x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta);
}

void kv_skinny_gemm(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t ldw,
                    ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
#if KV_X86
    if (kv_uses_avx2()) { avx2_f32(x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta, NULL, 0); return; }
#endif
    portable_f32(x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta);
}

void kv_skinny_gemm_packed_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t outputs,
                                    ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    portable_f32_packed(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta);
}

void kv_skinny_gemm_packed(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t outputs,
                           ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    kv_skinny_gemm_packed_then(x, ldx, rows, w, outputs, k, y, ldy, alpha, beta, NULL, 0);
}

// Decode with the AVX-512 bodies (decode512_groups, decode512_f32) prefetches nothing, `after`
// included: the hardware's stream runs on into the next rows by itself.
void kv_skinny_gemm_packed_then(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t outputs,
                                ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta, const void *after,
                                ptrdiff_t afterBytes) {
#if KV_X86
    if (avx512_for(rows)) { packed512_f32(x, ldx, rows, w, outputs, k, y, ldy, alpha, beta, after, afterBytes); return; }
    if (one_stream_decode(rows)) { decode512_groups_f32(x, w, outputs, k, y, alpha, beta); return; }
    if (rows == 1 && __atomic_load_n(&use_avx512, __ATOMIC_RELAXED)) { decode512_f32(x, w, outputs, k, y, alpha, beta); return; }
    if (kv_uses_avx2()) { avx2_f32_packed(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta, after, afterBytes); return; }
#endif
    (void)after, (void)afterBytes;
    portable_f32_packed(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta);
}

void kv_skinny_gemm_f16_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t ldw,
                                 ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    portable_f16(x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta);
}

void kv_skinny_gemm_f16(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t ldw,
                        ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
#if KV_X86
    if (has_f16c) { avx2_f16(x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta, NULL, 0); return; }
#endif
    portable_f16(x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta);
}

void kv_skinny_gemm_f16_packed_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w,
                                        ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    portable_f16_packed(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta);
}

void kv_skinny_gemm_f16_packed(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t outputs,
                               ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    kv_skinny_gemm_f16_packed_then(x, ldx, rows, w, outputs, k, y, ldy, alpha, beta, NULL, 0);
}

void kv_skinny_gemm_f16_packed_then(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t outputs,
                                    ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta, const void *after,
                                    ptrdiff_t afterBytes) {
#if KV_X86
    if (avx512_for(rows)) { packed512_f16(x, ldx, rows, w, outputs, k, y, ldy, alpha, beta, after, afterBytes); return; }
    if (one_stream_decode(rows)) { decode512_groups_f16(x, w, outputs, k, y, alpha, beta); return; }
    if (has_f16c) { avx2_f16_packed(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta, after, afterBytes); return; }
#endif
    (void)after, (void)afterBytes;
    portable_f16_packed(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta);
}

// The most columns split8x1 takes (its scaled activations live on the stack): 32 KB.
enum { SPLIT_MAX_K = 8192 };

void kv_skinny_gemm_f16_packed_finite(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w,
                                      ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    kv_skinny_gemm_f16_packed_finite_then(x, ldx, rows, w, outputs, k, y, ldy, alpha, beta, NULL, 0);
}

void kv_skinny_gemm_f16_packed_finite_then(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w,
                                           ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha,
                                           float beta, const void *after, ptrdiff_t afterBytes) {
#if KV_X86
    if (has_f16c && __atomic_load_n(&split_tile, __ATOMIC_RELAXED) && rows == 1 && outputs >= 8 && k >= 8 && k <= SPLIT_MAX_K) {
        float xs[k];
        if (scaled_for_split(xs, x, k)) {
            ptrdiff_t n = 0;
            for (; n + 8 <= outputs; n += 8) {   // each tile prefetches the next eight rows, as tile8x1 does
                const char *ahead = !kv_prefetch_rows ? NULL : n + 16 <= outputs ? (const char *)(w + (n + 8) * k)
                                  : n + 8 == outputs && afterBytes >= 8 * k * 2 ? (const char *)after : NULL;
                split8x1(x, xs, w, n, k, y + n, alpha, beta, ahead);
            }
            if (n < outputs) avx2_f16_packed(x, ldx, 1, w + n * k, k, outputs - n, k, y + n, ldy, alpha, beta, after, afterBytes);
            return;
        }
    }
#endif
    kv_skinny_gemm_f16_packed_then(x, ldx, rows, w, outputs, k, y, ldy, alpha, beta, after, afterBytes);
}

void kv_skinny_gemm_f16_chunked(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t ldw,
                                ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta,
                                float *scratch, ptrdiff_t ldscratch, ptrdiff_t chunkRows, int packed,
                                const void *after, ptrdiff_t afterBytes) {
    for (ptrdiff_t first = 0; first < outputs; first += chunkRows) {
        ptrdiff_t n = outputs - first < chunkRows ? outputs - first : chunkRows;
        // A packed chunk (whole groups of rows) is one contiguous run, converted as such.
        if (packed) kv_halfs_to_floats(scratch, w + first * k, n * k);
        else for (ptrdiff_t r = 0; r < n; r++) kv_halfs_to_floats(scratch + r * ldscratch, w + (first + r) * ldw, k);
        ptrdiff_t following = outputs - first - n < chunkRows ? outputs - first - n : chunkRows;
#if KV_X86
        if (kv_uses_avx2()) {   // the next chunk's halfs stream in while this one is multiplied
            const char *next = following ? (const char *)(w + (first + n) * ldw) : (const char *)after;
            ptrdiff_t nextBytes = following ? following * ldw * (ptrdiff_t)sizeof(uint16_t) : after ? afterBytes : 0;
            if (packed && avx512_for(rows)) packed512_f32(x, ldx, rows, scratch, n, k, y + first, ldy, alpha, beta, next, nextBytes);
            else if (packed) avx2_f32_packed(x, ldx, rows, scratch, k, n, k, y + first, ldy, alpha, beta, next, nextBytes);
            else avx2_f32(x, ldx, rows, scratch, ldscratch, n, k, y + first, ldy, alpha, beta, next, nextBytes);
            continue;
        }
#endif
        if (packed) portable_f32_packed(x, ldx, rows, scratch, k, n, k, y + first, ldy, alpha, beta);
        else portable_f32(x, ldx, rows, scratch, ldscratch, n, k, y + first, ldy, alpha, beta);
    }
}

// Packing moves elements within each group of KV_PACK_GROUP rows; `elementSize` bytes per element.
static void pack8(char *w, ptrdiff_t rows, ptrdiff_t k, size_t elementSize, char *group) {
    const ptrdiff_t G = KV_PACK_GROUP;
    ptrdiff_t end = k - k % 8, tail = k % 8;
    for (ptrdiff_t g = 0; g < rows; g += G) {
        char *base = w + (size_t)(g * k) * elementSize;
        memcpy(group, base, (size_t)(G * k) * elementSize);
        for (ptrdiff_t r = 0; r < G; r++) {
            const char *row = group + (size_t)(r * k) * elementSize;
            for (ptrdiff_t c = 0; c < end; c += 8)
                memcpy(base + (size_t)(c * G + r * 8) * elementSize, row + (size_t)c * elementSize, 8 * elementSize);
            memcpy(base + (size_t)(G * end + r * tail) * elementSize, row + (size_t)end * elementSize, (size_t)tail * elementSize);
        }
    }
}

void kv_pack8_f32(float *w, ptrdiff_t rows, ptrdiff_t k, float *group) {
    pack8((char *)w, rows, k, sizeof(float), (char *)group);
}

void kv_pack8_f16(uint16_t *w, ptrdiff_t rows, ptrdiff_t k, uint16_t *group) {
    pack8((char *)w, rows, k, sizeof(uint16_t), (char *)group);
}

ptrdiff_t kv_packed_index(ptrdiff_t n, ptrdiff_t i, ptrdiff_t k) {
    const ptrdiff_t G = KV_PACK_GROUP;
    ptrdiff_t end = k - k % 8, group = (n & ~(G - 1)) * k, r = n & (G - 1);
    return i < end ? group + (i - i % 8) * G + r * 8 + i % 8 : group + G * end + r * (k % 8) + (i - end);
}

void kv_unpack8_f32(float *dst, ptrdiff_t ldd, const float *w, ptrdiff_t first, ptrdiff_t rows, ptrdiff_t k) {
    ptrdiff_t end = k - k % 8;
    for (ptrdiff_t n = first; n < first + rows; n++) {
        float *out = dst + (n - first) * ldd;
        for (ptrdiff_t c = 0; c < end; c += 8) memcpy(out + c, w + kv_packed_index(n, c, k), 8 * sizeof(float));
        if (end < k) memcpy(out + end, w + kv_packed_index(n, end, k), (size_t)(k - end) * sizeof(float));
    }
}

void kv_unpack8_f16(float *dst, ptrdiff_t ldd, const uint16_t *w, ptrdiff_t first, ptrdiff_t rows, ptrdiff_t k) {
    ptrdiff_t end = k - k % 8;
    for (ptrdiff_t n = first; n < first + rows; n++) {
        float *out = dst + (n - first) * ldd;
        for (ptrdiff_t c = 0; c < end; c += 8) kv_halfs_to_floats(out + c, w + kv_packed_index(n, c, k), 8);
        if (end < k) kv_halfs_to_floats(out + end, w + kv_packed_index(n, end, k), k - end);
    }
}

void kv_halfs_to_floats_portable(float *dst, const uint16_t *src, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) dst[i] = kv_half_to_float(src[i]);
}

float kv_sum_halfs_portable(const uint16_t *w, ptrdiff_t n) {
    float sum = 0;
    for (ptrdiff_t i = 0; i < n; i++) sum += kv_half_to_float(w[i]);
    return sum;
}

float kv_sum_halfs(const uint16_t *w, ptrdiff_t n) {
#if KV_X86
    if (has_f16c) return sum_halfs_f16c(w, n);
#endif
    return kv_sum_halfs_portable(w, n);
}

void kv_halfs_to_floats(float *dst, const uint16_t *src, ptrdiff_t n) {
#if KV_X86
    if (has_f16c) { halfs_to_floats_f16c(dst, src, n); return; }
#endif
    kv_halfs_to_floats_portable(dst, src, n);
}
