// Projections of a few rows of activations (a short prefill, a decode step) by weights stored
// [out][in]: y[t][n] = alpha * dot(x[t], w[n]) + beta * y[t][n]. OpenBLAS's sgemm packs both
// operands and is tuned for many rows; with few, each weight row is better streamed once and
// dotted with every activation row while it sits in L1.
//
// Every output element gets the same arithmetic whichever tile computes it (eight lane sums
// accumulated in k order, then one fixed reduction, then the scalar tail), so results do not
// depend on how the rows are split into tiles or bands.

#include "CKernels.h"
#include <math.h>

static inline float finish(float dot, float alpha, float beta, const float *y) {
    return beta == 0 ? alpha * dot : alpha * dot + beta * *y;
}

void kv_skinny_gemm_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t ldw,
                             ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    for (ptrdiff_t n = 0; n < outputs; n++) {
        const float *wn = w + n * ldw;
        for (ptrdiff_t t = 0; t < rows; t++) {
            const float *xt = x + t * ldx;
            float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (ptrdiff_t i = 0; i < end; i += 8)
                for (int l = 0; l < 8; l++) lane[l] += xt[i + l] * wn[i + l];
            float dot = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
            for (ptrdiff_t i = end; i < k; i++) dot += xt[i] * wn[i];
            float *out = y + t * ldy + n;
            *out = finish(dot, alpha, beta, out);
        }
    }
}

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <immintrin.h>
#define KV_AVX2 __attribute__((target("avx2,fma")))
#define KV_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

// The same reduction as the portable body's: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
KV_AVX2_INLINE float reduce8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));   // l + (l+4)
    __m128 pairs = _mm_add_ps(s, _mm_movehl_ps(s, s));                                  // s0+s2, s1+s3
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

KV_AVX2_INLINE float tail(const float *xt, const float *wn, ptrdiff_t from, ptrdiff_t k, float dot) {
    for (ptrdiff_t i = from; i < k; i++) dot = fmaf(xt[i], wn[i], dot);
    return dot;
}

// Four weight rows by two activation rows: 8 accumulators, each weight vector loaded once per
// k step and used twice, each activation vector used four times.
KV_AVX2 static void tile4x2(const float *x, ptrdiff_t ldx, const float *w, ptrdiff_t ldw, ptrdiff_t k,
                            float *y, ptrdiff_t ldy, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    const float *x0 = x, *x1 = x + ldx, *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i), r;
        r = _mm256_loadu_ps(w0 + i); a00 = _mm256_fmadd_ps(v0, r, a00); a01 = _mm256_fmadd_ps(v1, r, a01);
        r = _mm256_loadu_ps(w1 + i); a10 = _mm256_fmadd_ps(v0, r, a10); a11 = _mm256_fmadd_ps(v1, r, a11);
        r = _mm256_loadu_ps(w2 + i); a20 = _mm256_fmadd_ps(v0, r, a20); a21 = _mm256_fmadd_ps(v1, r, a21);
        r = _mm256_loadu_ps(w3 + i); a30 = _mm256_fmadd_ps(v0, r, a30); a31 = _mm256_fmadd_ps(v1, r, a31);
    }
    __m256 acc[4][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
    for (int n = 0; n < 4; n++)
        for (int t = 0; t < 2; t++) {
            float *out = y + t * ldy + n;
            *out = finish(tail(x + t * ldx, w + n * ldw, end, k, reduce8(acc[n][t])), alpha, beta, out);
        }
}

// Four weight rows by three activation rows: 12 accumulators, enough independent FMAs to cover
// the FMA latency on two pipes; 7 loads per 12 FMAs.
KV_AVX2 static void tile4x3(const float *x, ptrdiff_t ldx, const float *w, ptrdiff_t ldw, ptrdiff_t k,
                            float *y, ptrdiff_t ldy, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i), v2 = _mm256_loadu_ps(x2 + i), r;
        r = _mm256_loadu_ps(w0 + i);
        a00 = _mm256_fmadd_ps(v0, r, a00); a01 = _mm256_fmadd_ps(v1, r, a01); a02 = _mm256_fmadd_ps(v2, r, a02);
        r = _mm256_loadu_ps(w1 + i);
        a10 = _mm256_fmadd_ps(v0, r, a10); a11 = _mm256_fmadd_ps(v1, r, a11); a12 = _mm256_fmadd_ps(v2, r, a12);
        r = _mm256_loadu_ps(w2 + i);
        a20 = _mm256_fmadd_ps(v0, r, a20); a21 = _mm256_fmadd_ps(v1, r, a21); a22 = _mm256_fmadd_ps(v2, r, a22);
        r = _mm256_loadu_ps(w3 + i);
        a30 = _mm256_fmadd_ps(v0, r, a30); a31 = _mm256_fmadd_ps(v1, r, a31); a32 = _mm256_fmadd_ps(v2, r, a32);
    }
    __m256 acc[4][3] = {{a00, a01, a02}, {a10, a11, a12}, {a20, a21, a22}, {a30, a31, a32}};
    for (int n = 0; n < 4; n++)
        for (int t = 0; t < 3; t++) {
            float *out = y + t * ldy + n;
            *out = finish(tail(x + t * ldx, w + n * ldw, end, k, reduce8(acc[n][t])), alpha, beta, out);
        }
}

// One weight row by one activation row: the edges, with the same arithmetic per element.
KV_AVX2 static void tile1x1(const float *x, const float *w, ptrdiff_t k, float *y, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    __m256 a = _mm256_setzero_ps();
    for (ptrdiff_t i = 0; i < end; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(w + i), a);
    *y = finish(tail(x, w, end, k, reduce8(a)), alpha, beta, y);
}

// Decode (one activation row): four weight rows at a time, four independent accumulators.
KV_AVX2 static void tile4x1(const float *x, const float *w, ptrdiff_t ldw, ptrdiff_t k, float *y, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(w0 + i), a0);
        a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(w1 + i), a1);
        a2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(w2 + i), a2);
        a3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(w3 + i), a3);
    }
    __m256 acc[4] = {a0, a1, a2, a3};
    for (int n = 0; n < 4; n++) y[n] = finish(tail(x, w + n * ldw, end, k, reduce8(acc[n])), alpha, beta, y + n);
}

KV_AVX2 static void skinny_avx2(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t ldw,
                                ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    ptrdiff_t n = 0;
    for (; n + 4 <= outputs; n += 4) {
        const float *wn = w + n * ldw;
        ptrdiff_t t = 0;
        if (rows == 1) {
            tile4x1(x, wn, ldw, k, y + n, alpha, beta);
            continue;
        }
        // Rows in threes and twos (any count from 2 is a sum of them): no single row re-reads the
        // four weight rows on its own.
        while (t < rows) {
            ptrdiff_t left = rows - t;
            if (left == 2 || left == 4) {
                tile4x2(x + t * ldx, ldx, wn, ldw, k, y + t * ldy + n, ldy, alpha, beta);
                t += 2;
            } else {
                tile4x3(x + t * ldx, ldx, wn, ldw, k, y + t * ldy + n, ldy, alpha, beta);
                t += 3;
            }
        }
    }
    for (; n < outputs; n++)
        for (ptrdiff_t t = 0; t < rows; t++) tile1x1(x + t * ldx, w + n * ldw, k, y + t * ldy + n, alpha, beta);
}
#endif

void kv_skinny_gemm(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t ldw,
                    ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
    if (kv_uses_avx2()) { skinny_avx2(x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta); return; }
#endif
    kv_skinny_gemm_portable(x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta);
}
