// The skinny-GEMM bodies, written once for any weight element type. skinny.c includes this file
// once per type after defining:
//   SKINNY_W          the weight element type (float, uint16_t for IEEE half)
//   SKINNY_NAME(n)    n with the type's suffix
//   SKINNY_SCALAR(p)  the float value of the element at p (portable)
//   SKINNY_LOAD8(p)   eight elements at p as a __m256 (x86-64 body)
//   SKINNY_TAIL(p)    the float value of the element at p (x86-64 body)
//   SKINNY_TARGET     the instruction sets the x86-64 body needs
//   SKINNY_CONVERTS   1 when loading a weight converts it (x86-64 body: four activation rows
//                     then share each conversion), else 0
// Converting a half to a float is exact, so each element's arithmetic is that of the float body
// on the converted weights, operation for operation.

static void SKINNY_NAME(portable)(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const SKINNY_W *w, ptrdiff_t ldw,
                                  ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    for (ptrdiff_t n = 0; n < outputs; n++) {
        const SKINNY_W *wn = w + n * ldw;
        for (ptrdiff_t t = 0; t < rows; t++) {
            const float *xt = x + t * ldx;
            float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (ptrdiff_t i = 0; i < end; i += 8)
                for (int l = 0; l < 8; l++) lane[l] += xt[i + l] * SKINNY_SCALAR(wn + i + l);
            float dot = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
            for (ptrdiff_t i = end; i < k; i++) dot += xt[i] * SKINNY_SCALAR(wn + i);
            float *out = y + t * ldy + n;
            *out = finish(dot, alpha, beta, out);
        }
    }
}

#if KV_X86
#define SKINNY_FN __attribute__((target(SKINNY_TARGET))) static
#define SKINNY_INLINE __attribute__((target(SKINNY_TARGET), always_inline)) static inline

SKINNY_INLINE float SKINNY_NAME(tail)(const float *xt, const SKINNY_W *wn, ptrdiff_t from, ptrdiff_t k, float dot) {
    for (ptrdiff_t i = from; i < k; i++) dot = fmaf(xt[i], SKINNY_TAIL(wn + i), dot);
    return dot;
}

// Four weight rows by two activation rows: 8 accumulators, each weight vector loaded once per
// k step and used twice, each activation vector used four times.
SKINNY_FN void SKINNY_NAME(tile4x2)(const float *x, ptrdiff_t ldx, const SKINNY_W *w, ptrdiff_t ldw, ptrdiff_t k,
                                    float *y, ptrdiff_t ldy, float alpha, float beta, const char *ahead, ptrdiff_t lines) {
    ptrdiff_t end = k - k % 8, steps = end > 8 ? end / 8 : 1, spread = 0;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    const float *x0 = x, *x1 = x + ldx;
    const SKINNY_W *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i), r;
        for (spread += lines; spread >= steps; spread -= steps, ahead += 64) _mm_prefetch(ahead, _MM_HINT_T0);
        r = SKINNY_LOAD8(w0 + i); a00 = _mm256_fmadd_ps(v0, r, a00); a01 = _mm256_fmadd_ps(v1, r, a01);
        r = SKINNY_LOAD8(w1 + i); a10 = _mm256_fmadd_ps(v0, r, a10); a11 = _mm256_fmadd_ps(v1, r, a11);
        r = SKINNY_LOAD8(w2 + i); a20 = _mm256_fmadd_ps(v0, r, a20); a21 = _mm256_fmadd_ps(v1, r, a21);
        r = SKINNY_LOAD8(w3 + i); a30 = _mm256_fmadd_ps(v0, r, a30); a31 = _mm256_fmadd_ps(v1, r, a31);
    }
    __m256 acc[4][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
    for (int n = 0; n < 4; n++)
        for (int t = 0; t < 2; t++) {
            float *out = y + t * ldy + n;
            *out = finish(SKINNY_NAME(tail)(x + t * ldx, w + n * ldw, end, k, reduce8(acc[n][t])), alpha, beta, out);
        }
}

// Four weight rows by three activation rows: 12 accumulators, enough independent FMAs to cover
// the FMA latency on two pipes; 7 loads per 12 FMAs.
SKINNY_FN void SKINNY_NAME(tile4x3)(const float *x, ptrdiff_t ldx, const SKINNY_W *w, ptrdiff_t ldw, ptrdiff_t k,
                                    float *y, ptrdiff_t ldy, float alpha, float beta, const char *ahead, ptrdiff_t lines) {
    ptrdiff_t end = k - k % 8, steps = end > 8 ? end / 8 : 1, spread = 0;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx;
    const SKINNY_W *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i), v2 = _mm256_loadu_ps(x2 + i), r;
        for (spread += lines; spread >= steps; spread -= steps, ahead += 64) _mm_prefetch(ahead, _MM_HINT_T0);
        r = SKINNY_LOAD8(w0 + i);
        a00 = _mm256_fmadd_ps(v0, r, a00); a01 = _mm256_fmadd_ps(v1, r, a01); a02 = _mm256_fmadd_ps(v2, r, a02);
        r = SKINNY_LOAD8(w1 + i);
        a10 = _mm256_fmadd_ps(v0, r, a10); a11 = _mm256_fmadd_ps(v1, r, a11); a12 = _mm256_fmadd_ps(v2, r, a12);
        r = SKINNY_LOAD8(w2 + i);
        a20 = _mm256_fmadd_ps(v0, r, a20); a21 = _mm256_fmadd_ps(v1, r, a21); a22 = _mm256_fmadd_ps(v2, r, a22);
        r = SKINNY_LOAD8(w3 + i);
        a30 = _mm256_fmadd_ps(v0, r, a30); a31 = _mm256_fmadd_ps(v1, r, a31); a32 = _mm256_fmadd_ps(v2, r, a32);
    }
    __m256 acc[4][3] = {{a00, a01, a02}, {a10, a11, a12}, {a20, a21, a22}, {a30, a31, a32}};
    for (int n = 0; n < 4; n++)
        for (int t = 0; t < 3; t++) {
            float *out = y + t * ldy + n;
            *out = finish(SKINNY_NAME(tail)(x + t * ldx, w + n * ldw, end, k, reduce8(acc[n][t])), alpha, beta, out);
        }
}

// Two weight rows by four activation rows: 8 accumulators, each weight loaded (and converted)
// once for all four rows. Streams its rows from memory itself, prefetching the two rows at
// `ahead` (may be NULL) once per cache line.
SKINNY_FN void SKINNY_NAME(tile2x4)(const float *x, ptrdiff_t ldx, const SKINNY_W *w, ptrdiff_t ldw, ptrdiff_t k,
                                    float *y, ptrdiff_t ldy, float alpha, float beta, const SKINNY_W *ahead) {
    ptrdiff_t end = k - k % 8;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
    const SKINNY_W *w0 = w, *w1 = w + ldw;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        if (ahead && (i & (64 / sizeof(SKINNY_W) - 1)) == 0) {
            _mm_prefetch((const char *)(ahead + i), _MM_HINT_T0);
            _mm_prefetch((const char *)(ahead + ldw + i), _MM_HINT_T0);
        }
        __m256 r0 = SKINNY_LOAD8(w0 + i), r1 = SKINNY_LOAD8(w1 + i), v;
        v = _mm256_loadu_ps(x0 + i); a00 = _mm256_fmadd_ps(v, r0, a00); a10 = _mm256_fmadd_ps(v, r1, a10);
        v = _mm256_loadu_ps(x1 + i); a01 = _mm256_fmadd_ps(v, r0, a01); a11 = _mm256_fmadd_ps(v, r1, a11);
        v = _mm256_loadu_ps(x2 + i); a02 = _mm256_fmadd_ps(v, r0, a02); a12 = _mm256_fmadd_ps(v, r1, a12);
        v = _mm256_loadu_ps(x3 + i); a03 = _mm256_fmadd_ps(v, r0, a03); a13 = _mm256_fmadd_ps(v, r1, a13);
    }
    __m256 acc[2][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}};
    for (int n = 0; n < 2; n++)
        for (int t = 0; t < 4; t++) {
            float *out = y + t * ldy + n;
            *out = finish(SKINNY_NAME(tail)(x + t * ldx, w + n * ldw, end, k, reduce8(acc[n][t])), alpha, beta, out);
        }
}

// One weight row by one activation row: the edges, with the same arithmetic per element.
SKINNY_FN void SKINNY_NAME(tile1x1)(const float *x, const SKINNY_W *w, ptrdiff_t k, float *y, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    __m256 a = _mm256_setzero_ps();
    for (ptrdiff_t i = 0; i < end; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), SKINNY_LOAD8(w + i), a);
    *y = finish(SKINNY_NAME(tail)(x, w, end, k, reduce8(a)), alpha, beta, y);
}

// Decode (one activation row): four weight rows at a time, four independent accumulators.
SKINNY_FN void SKINNY_NAME(tile4x1)(const float *x, const SKINNY_W *w, ptrdiff_t ldw, ptrdiff_t k, float *y,
                                    float alpha, float beta, int prefetch) {
    ptrdiff_t end = k - k % 8;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const SKINNY_W *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (prefetch && (i & (64 / sizeof(SKINNY_W) - 1)) == 0) {   // once per cache line of each row
            const SKINNY_W *ahead = w0 + prefetch * ldw + i;
            _mm_prefetch((const char *)ahead, _MM_HINT_T0);
            _mm_prefetch((const char *)(ahead + ldw), _MM_HINT_T0);
            _mm_prefetch((const char *)(ahead + 2 * ldw), _MM_HINT_T0);
            _mm_prefetch((const char *)(ahead + 3 * ldw), _MM_HINT_T0);
        }
        a0 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w0 + i), a0);
        a1 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w1 + i), a1);
        a2 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w2 + i), a2);
        a3 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w3 + i), a3);
    }
    __m256 acc[4] = {a0, a1, a2, a3};
    for (int n = 0; n < 4; n++)
        y[n] = finish(SKINNY_NAME(tail)(x, w + n * ldw, end, k, reduce8(acc[n])), alpha, beta, y + n);
}

// Decode, eight weight rows at a time: eight independent FMA chains and eight streams in flight,
// which hides DRAM latency better than four (each row's arithmetic is unchanged). Row pointers and
// accumulators are named, not indexed. Float weights: the loop holds nothing else, so every load
// addresses its row's own register plus the index. With a software prefetch in the loop clang ran
// out of registers and derived each row's address from the previous one's, a chain of adds in
// front of every load: two cores then streamed 25-26 GB/s from DRAM against 26-28 without it
// (Zen 1, 2 MiB pages; the prefetch itself changed nothing). Half weights, which convert every
// load and so keep fewer misses in flight, still gain from prefetching `prefetch` rows ahead
// (decode on `base` about 8% faster with it).
#if SKINNY_CONVERTS
SKINNY_FN void SKINNY_NAME(tile8x1)(const float *x, const SKINNY_W *w, ptrdiff_t ldw, ptrdiff_t k, float *y,
                                    float alpha, float beta, int prefetch) {
#else
SKINNY_FN __attribute__((noinline)) void SKINNY_NAME(tile8x1)(const float *x, const SKINNY_W *w, ptrdiff_t ldw, ptrdiff_t k,
                                                              float *y, float alpha, float beta, int prefetch) {
    (void)prefetch;
#endif
    ptrdiff_t end = k - k % 8;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const SKINNY_W *w0 = w, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw, *w4 = w3 + ldw, *w5 = w4 + ldw,
                   *w6 = w5 + ldw, *w7 = w6 + ldw;
#if !SKINNY_CONVERTS
    // Opaque to the optimiser: otherwise clang re-derives each row's address from the last one's.
    __asm__("" : "+r"(w1), "+r"(w2), "+r"(w3), "+r"(w4), "+r"(w5), "+r"(w6), "+r"(w7));
#endif
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
#if SKINNY_CONVERTS
        if (prefetch && (i & (64 / sizeof(SKINNY_W) - 1)) == 0)   // once per cache line of each row
            for (int n = 0; n < 8; n++) _mm_prefetch((const char *)(w + (prefetch + n) * ldw + i), _MM_HINT_T0);
#endif
        a0 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w0 + i), a0);
        a1 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w1 + i), a1);
        a2 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w2 + i), a2);
        a3 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w3 + i), a3);
        a4 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w4 + i), a4);
        a5 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w5 + i), a5);
        a6 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w6 + i), a6);
        a7 = _mm256_fmadd_ps(v, SKINNY_LOAD8(w7 + i), a7);
    }
    __m256 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    for (int n = 0; n < 8; n++)
        y[n] = finish(SKINNY_NAME(tail)(x, w + n * ldw, end, k, reduce8(acc[n])), alpha, beta, y + n);
}

// `after` (`afterBytes` long, may be NULL) is memory the caller reads next: the last group of
// weight rows prefetches it instead of rows beyond the matrix.
SKINNY_FN void SKINNY_NAME(avx2)(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const SKINNY_W *w, ptrdiff_t ldw,
                                 ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta,
                                 const char *after, ptrdiff_t afterBytes) {
    ptrdiff_t n = 0;
#if SKINNY_CONVERTS
    // Where converting a weight costs more than streaming it (F16C on 128-bit units), four rows
    // sharing each conversion beat tiles of three and two that convert every weight twice.
    if (rows >= 4) {
        for (; n + 2 <= outputs; n += 2)
            SKINNY_NAME(tile2x4)(x, ldx, w + n * ldw, ldw, k, y + n, ldy, alpha, beta,
                                 n + kv_prefetch_rows + 2 <= outputs ? w + (n + kv_prefetch_rows) * ldw : NULL);
        for (; n < outputs; n++)
            for (ptrdiff_t t = 0; t < 4; t++) SKINNY_NAME(tile1x1)(x + t * ldx, w + n * ldw, k, y + t * ldy + n, alpha, beta);
        if (rows == 4) return;
        x += 4 * ldx;
        y += 4 * ldy;
        rows -= 4;
        n = 0;
    }
#endif
    for (; n + 4 <= outputs; n += 4) {
        const SKINNY_W *wn = w + n * ldw;
        if (rows == 1 && n + 8 <= outputs) {
            SKINNY_NAME(tile8x1)(x, wn, ldw, k, y + n, alpha, beta, n + kv_prefetch_rows + 8 <= outputs ? kv_prefetch_rows : 0);
            n += 4;   // and 4 more by the loop
            continue;
        }
        if (rows == 1) {
            SKINNY_NAME(tile4x1)(x, wn, ldw, k, y + n, alpha, beta, n + kv_prefetch_rows + 4 <= outputs ? kv_prefetch_rows : 0);
            continue;
        }
        // Rows in threes and twos (any count from 2 is a sum of them): no single row re-reads the
        // four weight rows on its own. Only the first tile reads them from DRAM, so each tile also
        // prefetches its share of the next four rows, spread evenly over its iterations: the
        // memory then streams while the later tiles compute (from DRAM, 15 rows ran at 0.6 of the
        // in-cache speed without it, 0.95 with it, on a Zen 3).
        ptrdiff_t tiles = (rows + 2) / 3;
        const char *next = n + 8 <= outputs ? (const char *)(wn + 4 * ldw) : after;
        ptrdiff_t nextBytes = n + 8 <= outputs ? 4 * ldw * (ptrdiff_t)sizeof(SKINNY_W) : n + 4 == outputs && after ? afterBytes : 0;
        ptrdiff_t share = (nextBytes / 64 + tiles - 1) / tiles;
        for (ptrdiff_t t = 0, tile = 0; t < rows; tile++) {
            ptrdiff_t left = rows - t;
            if (left == 2 || left == 4) {
                SKINNY_NAME(tile4x2)(x + t * ldx, ldx, wn, ldw, k, y + t * ldy + n, ldy, alpha, beta, next + 64 * tile * share, share);
                t += 2;
            } else {
                SKINNY_NAME(tile4x3)(x + t * ldx, ldx, wn, ldw, k, y + t * ldy + n, ldy, alpha, beta, next + 64 * tile * share, share);
                t += 3;
            }
        }
    }
    for (; n < outputs; n++)
        for (ptrdiff_t t = 0; t < rows; t++)
            SKINNY_NAME(tile1x1)(x + t * ldx, w + n * ldw, k, y + t * ldy + n, alpha, beta);
}
#undef SKINNY_FN
#undef SKINNY_INLINE
#endif
