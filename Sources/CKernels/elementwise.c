// See CKernels.h. The exponential is a Cephes-style range reduction (x = n·ln2 + r) and a
// degree-5 polynomial for e^r, relative error about 2e-7 over the clamped float range.

#include "CKernels.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define EXP_HIGH 88.3f
#define EXP_LOW -87.3f
#define LOG2E 1.44269504f
#define LN2_HIGH 0.693359375f
#define LN2_LOW -2.12194440e-4f
#define ROUNDER 12582912.0f   // 1.5 · 2^23: adding it rounds a float to an integer in the low bits
static const float exp_poly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                  4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// ---- portable bodies: branch-free scalar code that compilers vectorise at the baseline ----

static inline float exp_portable(float x) {
    x = x > EXP_HIGH ? EXP_HIGH : x;
    x = x < EXP_LOW ? EXP_LOW : x;
    float shifted = x * LOG2E + ROUNDER;
    float n = shifted - ROUNDER;
    float r = x - n * LN2_HIGH;
    r = r - n * LN2_LOW;
    float p = exp_poly[0];
    for (int i = 1; i < 6; i++) p = p * r + exp_poly[i];
    float y = p * (r * r) + r + 1.0f;
    int32_t shiftedBits, roundBits;
    memcpy(&shiftedBits, &shifted, sizeof shiftedBits);
    float rounder = ROUNDER;
    memcpy(&roundBits, &rounder, sizeof roundBits);
    int32_t scaleBits = (shiftedBits - roundBits + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &scaleBits, sizeof scale);
    return y * scale;
}

float kv_max_portable(const float *x, ptrdiff_t n) {
    float max = x[0];
    for (ptrdiff_t i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}

float kv_sum_portable(const float *x, ptrdiff_t n) {
    float acc[4] = {0, 0, 0, 0};
    ptrdiff_t i = 0;
    for (; i + 4 <= n; i += 4) {
        acc[0] += x[i]; acc[1] += x[i + 1]; acc[2] += x[i + 2]; acc[3] += x[i + 3];
    }
    for (; i < n; i++) acc[0] += x[i];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

float kv_exp_sub_sum_portable(float *x, ptrdiff_t n, float shift) {
    float sum = 0;
    for (ptrdiff_t i = 0; i < n; i++) {
        x[i] = exp_portable(x[i] - shift);
        sum += x[i];
    }
    return sum;
}

float kv_exp_shifted_sum_portable(float *x, ptrdiff_t n) {
    return kv_exp_sub_sum_portable(x, n, kv_max_portable(x, n));
}

void kv_swiglu_portable(float *gate, const float *up, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + exp_portable(-gate[i])) * up[i];
}

void kv_rmsnorm_portable(float *dst, const float *x, const float *weight, ptrdiff_t n, float epsilon) {
    float sum = 0;
    for (ptrdiff_t i = 0; i < n; i++) sum += x[i] * x[i];
    float scale = 1.0f / sqrtf(sum / (float)n + epsilon);
    for (ptrdiff_t i = 0; i < n; i++) dst[i] = weight[i] * (scale * x[i]);
}

// ---- AVX2 + FMA bodies, compiled for those extensions only, chosen at run time ----

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <immintrin.h>
#define KV_AVX2 __attribute__((target("avx2,fma")))
#define KV_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

// The exponential's operations on a vector of W bits (256 or 512; every lane the same arithmetic
// at either width): clamp, x = n·ln2 + r with n rounded to nearest (ROUND), the polynomial in r,
// then y · 2^n (SCALE). After the clamp 2^n is a normal float and the polynomial's y about 1, so
// y · 2^n is exact, whether as a product with 2^n built from exponent bits or as one VSCALEFPS.
#define KV_EXP_VECTOR(ATTRIBUTES, NAME, W, ROUND, SCALE)                                                        \
    ATTRIBUTES __m##W NAME(__m##W x) {                                                                           \
        x = _mm##W##_min_ps(x, _mm##W##_set1_ps(EXP_HIGH));                                                      \
        x = _mm##W##_max_ps(x, _mm##W##_set1_ps(EXP_LOW));                                                       \
        __m##W n = ROUND(_mm##W##_mul_ps(x, _mm##W##_set1_ps(LOG2E)));                                           \
        __m##W r = _mm##W##_fnmadd_ps(n, _mm##W##_set1_ps(LN2_HIGH), x);                                         \
        r = _mm##W##_fnmadd_ps(n, _mm##W##_set1_ps(LN2_LOW), r);                                                 \
        __m##W p = _mm##W##_set1_ps(exp_poly[0]);                                                                \
        for (int i = 1; i < 6; i++) p = _mm##W##_fmadd_ps(p, r, _mm##W##_set1_ps(exp_poly[i]));                  \
        __m##W y = _mm##W##_fmadd_ps(p, _mm##W##_mul_ps(r, r), _mm##W##_add_ps(r, _mm##W##_set1_ps(1.0f)));      \
        return SCALE(y, n);                                                                                      \
    }
#define KV_ROUND8(v) _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define KV_SCALE8(y, n) \
    _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)))
KV_EXP_VECTOR(KV_AVX2_INLINE, exp8, 256, KV_ROUND8, KV_SCALE8)

KV_AVX2_INLINE float sum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

KV_AVX2_INLINE float max8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

// Four running maxima side by side (a maximum is exact in any order): one alone waits on its own
// latency every eight floats, which over a 128-key tile of scores is most of the time.
KV_AVX2 static float max_avx2(const float *x, ptrdiff_t n) {
    ptrdiff_t end = n - n % 8, i;
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    for (i = 0; i + 32 <= end; i += 32) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
        m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + i + 16));
        m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + i + 24));
    }
    for (; i < end; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    float max = max8(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    for (i = end; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}

// The end of exp_sub_sum on either body, from element i on, onto its accumulator `acc`: eight
// at a time up to the last whole eight, the eight lanes summed, then the scalar tail.
KV_AVX2_INLINE float exp_sub_sum_rest(float *x, ptrdiff_t i, ptrdiff_t n, float max, __m256 acc) {
    ptrdiff_t end = n - n % 8;
    for (; i < end; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(max)));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = sum8(acc);
    for (i = end; i < n; i++) {
        x[i] = exp_portable(x[i] - max);
        sum += x[i];
    }
    return sum;
}

KV_AVX2 static float exp_sub_sum_avx2(float *x, ptrdiff_t n, float max) {
    ptrdiff_t end = n - n % 8, i;
    __m256 m = _mm256_set1_ps(max), a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    // Four vectors per step, each summed into its own accumulator: exp8 is a long dependent chain,
    // and four side by side keep more of it in flight (on a Zen 1, about 18% faster over a 128-key
    // tile); one accumulator for all four made its additions the chain (on an Emerald Rapids the
    // AVX-512 body's softmax took 15% of the few-query attention kernel with one, 12% with four).
    for (i = 0; i + 32 <= end; i += 32) {
        __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m)), e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m));
        __m256 e2 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 16), m)), e3 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 24), m));
        _mm256_storeu_ps(x + i, e0);
        _mm256_storeu_ps(x + i + 8, e1);
        _mm256_storeu_ps(x + i + 16, e2);
        _mm256_storeu_ps(x + i + 24, e3);
        a0 = _mm256_add_ps(a0, e0), a1 = _mm256_add_ps(a1, e1), a2 = _mm256_add_ps(a2, e2), a3 = _mm256_add_ps(a3, e3);
    }
    return exp_sub_sum_rest(x, i, n, max, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

// ---- AVX-512 bodies with the AVX2 bodies' bits, where the skinny kernels' switch allows ----

#define KV_AVX512 __attribute__((target("avx2,fma,avx512f,avx512dq,avx512vl")))
#define KV_AVX512_INLINE __attribute__((target("avx2,fma,avx512f,avx512dq,avx512vl"), always_inline)) static inline

// exp8's operations, sixteen lanes at a time (the scale in one instruction, the same bits).
#define KV_ROUND16(v) _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define KV_SCALE16(y, n) _mm512_scalef_ps(y, n)
KV_EXP_VECTOR(KV_AVX512_INLINE, exp16, 512, KV_ROUND16, KV_SCALE16)

// One 32-float step of exp_sub_sum_avx2 in two 512-bit halves: each result's halves are two of its
// eight-lane vectors, and each accumulator's halves two of its accumulators (a0 | a1 and a2 | a3).
KV_AVX512_INLINE void exp_step512(float *x, __m512 max, __m512 *a01, __m512 *a23) {
    __m512 e01 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x), max)), e23 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + 16), max));
    _mm512_storeu_ps(x, e01);
    _mm512_storeu_ps(x + 16, e23);
    *a01 = _mm512_add_ps(*a01, e01), *a23 = _mm512_add_ps(*a23, e23);
}

// The accumulators of exp_step512 combined as exp_sub_sum_avx2 combines its four, then the rest of x from i.
KV_AVX512_INLINE float exp_end512(float *x, ptrdiff_t i, ptrdiff_t n, float max, __m512 a01, __m512 a23) {
    __m256 low = _mm256_add_ps(_mm512_castps512_ps256(a01), _mm512_extractf32x8_ps(a01, 1));
    __m256 high = _mm256_add_ps(_mm512_castps512_ps256(a23), _mm512_extractf32x8_ps(a23, 1));
    return exp_sub_sum_rest(x, i, n, max, _mm256_add_ps(low, high));
}

// exp_sub_sum_avx2 with half as many exponentials, the same bits.
KV_AVX512 static float exp_sub_sum_avx512(float *x, ptrdiff_t n, float max) {
    const ptrdiff_t steps = (n - n % 8) / 32;
    __m512 m = _mm512_set1_ps(max), a01 = _mm512_setzero_ps(), a23 = a01;
    for (ptrdiff_t s = 0; s < steps; s++) exp_step512(x + 32 * s, m, &a01, &a23);
    return exp_end512(x, 32 * steps, n, max, a01, a23);
}

// exp_sub_sum_avx512 of two rows, their steps interleaved while both have them: four exponentials'
// chains in flight where one row alone has two, and neither row's maximum, exponentials and sum
// wait on the other's. Each row's accumulators take its own steps in its own order: its bits are
// exp_sub_sum_avx512's. Why: one row of a 128-key tile is eight vectors, and alone its maximum, then
// its exponentials, then its sum wait on each other's latency; on an Emerald Rapids the softmax step
// took 15.7% of 30 new tokens' attention over 1,536 keys one row at a time and 13.3% two at a time
// (CPU-clock profile of Benchmarks/harness/attend-keys.c).
KV_AVX512 static void exp_sub_sum_pair_avx512(float *x0, ptrdiff_t n0, float max0, float *x1, ptrdiff_t n1, float max1,
                                              float sums[2]) {
    const ptrdiff_t steps0 = (n0 - n0 % 8) / 32, steps1 = (n1 - n1 % 8) / 32, both = steps0 < steps1 ? steps0 : steps1;
    __m512 m0 = _mm512_set1_ps(max0), m1 = _mm512_set1_ps(max1), a01 = _mm512_setzero_ps(), a23 = a01, b01 = a01, b23 = a01;
    ptrdiff_t s = 0;
    for (; s < both; s++) exp_step512(x0 + 32 * s, m0, &a01, &a23), exp_step512(x1 + 32 * s, m1, &b01, &b23);
    for (ptrdiff_t t = s; t < steps0; t++) exp_step512(x0 + 32 * t, m0, &a01, &a23);
    for (ptrdiff_t t = s; t < steps1; t++) exp_step512(x1 + 32 * t, m1, &b01, &b23);
    sums[0] = exp_end512(x0, 32 * steps0, n0, max0, a01, a23);
    sums[1] = exp_end512(x1, 32 * steps1, n1, max1, b01, b23);
}

KV_AVX2 static float exp_shifted_sum_avx2(float *x, ptrdiff_t n) { return exp_sub_sum_avx2(x, n, max_avx2(x, n)); }

// The 32 floats at p added into four accumulators.
#define KV_ADD32(p)                                                                              \
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p)), a1 = _mm256_add_ps(a1, _mm256_loadu_ps((p) + 8)), \
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps((p) + 16)), a3 = _mm256_add_ps(a3, _mm256_loadu_ps((p) + 24))

// `streams` streams (1 to 8): x cut into that many equal parts read in lockstep, 32 floats of each
// a step, then the rest. Which count reads fastest is the machine's: on a Zen 5 VM two streams per
// core read 1.01-1.03x one stream's GB/s in its fast memory state (82-87 GB/s) and 1.03-1.04x in its
// slow one (47-50), four no better, eight worse; on an Emerald Rapids VM, one core alone, 1 / 2 / 4
// streams read 12.0 / 14.3 / 15.3 GB/s, and two cores 4 streams each 1.06-1.09x two each. So the
// read ceiling's probe (streamingSum) takes the best of several counts.
KV_AVX2 static float sum_avx2(const float *x, ptrdiff_t n, int streams) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const ptrdiff_t part = n / (32 * streams) * 32;
    ptrdiff_t i = 0;
    for (; i < part; i += 32)
        for (int s = 0; s < streams; s++) KV_ADD32(x + s * part + i);
    for (i = streams * part; i + 32 <= n; i += 32) KV_ADD32(x + i);
#undef KV_ADD32
    float sum = sum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    return sum + kv_sum_portable(x + i, n - i);
}

KV_AVX2 static void swiglu_avx2(float *gate, const float *up, ptrdiff_t n) {
    ptrdiff_t end = n - n % 8, i;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (i = 0; i < end; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, g))));
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    kv_swiglu_portable(gate + end, up + end, n - end);
}

KV_AVX2 static void rmsnorm_avx2(float *dst, const float *x, const float *weight, ptrdiff_t n, float epsilon) {
    ptrdiff_t end = n - n % 8, i;
    __m256 acc = _mm256_setzero_ps();
    for (i = 0; i < end; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        acc = _mm256_fmadd_ps(v, v, acc);
    }
    float sum = sum8(acc);
    for (i = end; i < n; i++) sum += x[i] * x[i];
    float scale = 1.0f / sqrtf(sum / (float)n + epsilon);
    __m256 s = _mm256_set1_ps(scale);
    for (i = 0; i < end; i += 8) {
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_loadu_ps(weight + i), _mm256_mul_ps(s, _mm256_loadu_ps(x + i))));
    }
    for (i = end; i < n; i++) dst[i] = weight[i] * (scale * x[i]);
}

// Decided once, before main runs, so the entry points only read it.
static int has_avx2 = 0;
__attribute__((constructor)) static void detect_avx2(void) {
    __builtin_cpu_init();
    has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
static const int has_avx2 = 0;
static float exp_shifted_sum_avx2(float *x, ptrdiff_t n) { return kv_exp_shifted_sum_portable(x, n); }
static float max_avx2(const float *x, ptrdiff_t n) { return kv_max_portable(x, n); }
static float sum_avx2(const float *x, ptrdiff_t n, int streams) { (void)streams; return kv_sum_portable(x, n); }
static float exp_sub_sum_avx2(float *x, ptrdiff_t n, float s) { return kv_exp_sub_sum_portable(x, n, s); }
static float exp_sub_sum_avx512(float *x, ptrdiff_t n, float s) { return kv_exp_sub_sum_portable(x, n, s); }
static void exp_sub_sum_pair_avx512(float *x0, ptrdiff_t n0, float s0, float *x1, ptrdiff_t n1, float s1, float sums[2]) {
    sums[0] = kv_exp_sub_sum_portable(x0, n0, s0), sums[1] = kv_exp_sub_sum_portable(x1, n1, s1);
}
static void swiglu_avx2(float *g, const float *u, ptrdiff_t n) { kv_swiglu_portable(g, u, n); }
static void rmsnorm_avx2(float *d, const float *x, const float *w, ptrdiff_t n, float e) { kv_rmsnorm_portable(d, x, w, n, e); }
#endif

int kv_uses_avx2(void) { return has_avx2; }

float kv_exp_shifted_sum(float *x, ptrdiff_t n) {
    return has_avx2 ? exp_shifted_sum_avx2(x, n) : kv_exp_shifted_sum_portable(x, n);
}

float kv_sum(const float *x, ptrdiff_t n) {
    return has_avx2 ? sum_avx2(x, n, 2) : kv_sum_portable(x, n);
}

float kv_sum_streams(const float *x, ptrdiff_t n, int streams) {
    streams = streams < 1 ? 1 : streams > 8 ? 8 : streams;
    return has_avx2 ? sum_avx2(x, n, streams) : kv_sum_portable(x, n);
}

float kv_max(const float *x, ptrdiff_t n) {
    return has_avx2 ? max_avx2(x, n) : kv_max_portable(x, n);
}

float kv_exp_sub_sum(float *x, ptrdiff_t n, float shift) {
    if (!has_avx2) return kv_exp_sub_sum_portable(x, n, shift);
    return kv_uses_skinny_avx512() ? exp_sub_sum_avx512(x, n, shift) : exp_sub_sum_avx2(x, n, shift);
}

void kv_exp_sub_sum_pair(float *x0, ptrdiff_t n0, float shift0, float *x1, ptrdiff_t n1, float shift1, float sums[2]) {
    if (has_avx2 && kv_uses_skinny_avx512()) { exp_sub_sum_pair_avx512(x0, n0, shift0, x1, n1, shift1, sums); return; }
    sums[0] = kv_exp_sub_sum(x0, n0, shift0), sums[1] = kv_exp_sub_sum(x1, n1, shift1);
}

void kv_swiglu(float *gate, const float *up, ptrdiff_t n) {
    if (has_avx2) swiglu_avx2(gate, up, n); else kv_swiglu_portable(gate, up, n);
}

void kv_rmsnorm(float *dst, const float *x, const float *weight, ptrdiff_t n, float epsilon) {
    if (has_avx2) rmsnorm_avx2(dst, x, weight, n, epsilon); else kv_rmsnorm_portable(dst, x, weight, n, epsilon);
}
