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
#else
#define KV_X86 0
#endif

static inline float finish(float dot, float alpha, float beta, const float *y) {
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
__attribute__((constructor)) static void detect_f16c(void) {
    __builtin_cpu_init();
    has_f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
#else
static const int has_f16c = 0;
#endif

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
#if KV_X86
    if (kv_uses_avx2()) { avx2_f32_packed(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta, NULL, 0); return; }
#endif
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
#if KV_X86
    if (has_f16c) { avx2_f16_packed(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta, NULL, 0); return; }
#endif
    portable_f16_packed(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta);
}

void kv_skinny_gemm_f16_chunked(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t ldw,
                                ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta,
                                float *scratch, ptrdiff_t ldscratch, ptrdiff_t chunkRows, int packed) {
    for (ptrdiff_t first = 0; first < outputs; first += chunkRows) {
        ptrdiff_t n = outputs - first < chunkRows ? outputs - first : chunkRows;
        // A packed chunk (whole groups of rows) is one contiguous run, converted as such.
        if (packed) kv_halfs_to_floats(scratch, w + first * k, n * k);
        else for (ptrdiff_t r = 0; r < n; r++) kv_halfs_to_floats(scratch + r * ldscratch, w + (first + r) * ldw, k);
        ptrdiff_t following = outputs - first - n < chunkRows ? outputs - first - n : chunkRows;
#if KV_X86
        if (kv_uses_avx2()) {   // the next chunk's halfs stream in while this one is multiplied
            const char *next = (const char *)(w + (first + n) * ldw);
            ptrdiff_t nextBytes = following * ldw * (ptrdiff_t)sizeof(uint16_t);
            if (packed) avx2_f32_packed(x, ldx, rows, scratch, k, n, k, y + first, ldy, alpha, beta, next, nextBytes);
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
