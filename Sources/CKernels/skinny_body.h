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
//   SKINNY_PACKED     1 for weights in groups of rows interleaved by eight-element chunks
//                     (see kv_pack8_f32 in CKernels.h), 0 for plain rows
//   SKINNY_GROUP      rows per packed group (1 for plain rows)
// Rows are reached through SKINNY_ROW (row n's first chunk), chunks through SKINNY_AT (the
// chunk holding element i, i a multiple of 8), the elements beyond the last whole chunk through
// SKINNY_TAILROW. Tiles of up to four rows start on a multiple of their height and so never
// straddle a packed group: their row j is their first row plus j * SKINNY_NEXTROW (a constant
// offset when packed, which keeps every row pointer out of the stack in the inlined loops).
// Converting a half to a float is exact, so each element's arithmetic is that of the float body
// on the converted weights, operation for operation.

static void SKINNY_NAME(portable)(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const SKINNY_W *w, ptrdiff_t ldw,
                                  ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    for (ptrdiff_t n = 0; n < outputs; n++) {
        const SKINNY_W *wn = SKINNY_ROW(w, n, ldw), *tail = SKINNY_TAILROW(w, n, ldw, k);
        for (ptrdiff_t t = 0; t < rows; t++) {
            const float *xt = x + t * ldx;
            float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (ptrdiff_t i = 0; i < end; i += 8)
                for (int l = 0; l < 8; l++) lane[l] += xt[i + l] * SKINNY_SCALAR(SKINNY_AT(wn, i) + l);
            float dot = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
            for (ptrdiff_t i = end; i < k; i++) dot += xt[i] * SKINNY_SCALAR(tail + i);
            float *out = y + t * ldy + n;
            *out = finish(dot, alpha, beta, out);
        }
    }
}

#if KV_X86
#define SKINNY_FN __attribute__((target(SKINNY_TARGET))) static
#define SKINNY_INLINE __attribute__((target(SKINNY_TARGET), always_inline)) static inline

// The dot product's elements beyond the last whole chunk, on row n of the matrix at w.
SKINNY_INLINE float SKINNY_NAME(tail)(const float *xt, const SKINNY_W *w, ptrdiff_t n, ptrdiff_t ldw, ptrdiff_t k,
                                      float dot) {
    const SKINNY_W *row = SKINNY_TAILROW(w, n, ldw, k);
    for (ptrdiff_t i = k - k % 8; i < k; i++) dot = fmaf(xt[i], SKINNY_TAIL(row + i), dot);
    return dot;
}

// Four weight rows (n ..< n+4) by two activation rows: 8 accumulators, each weight vector loaded
// once per k step and used twice, each activation vector used four times.
SKINNY_FN void SKINNY_NAME(tile4x2)(const float *x, ptrdiff_t ldx, const SKINNY_W *w, ptrdiff_t n, ptrdiff_t ldw,
                                    ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta, const char *ahead,
                                    ptrdiff_t lines) {
    ptrdiff_t end = k - k % 8, steps = end > 8 ? end / 8 : 1, spread = 0;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    const float *x0 = x, *x1 = x + ldx;
    const SKINNY_W *w0 = SKINNY_ROW(w, n, ldw), *w1 = w0 + SKINNY_NEXTROW(ldw), *w2 = w1 + SKINNY_NEXTROW(ldw),
                   *w3 = w2 + SKINNY_NEXTROW(ldw);
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i), r;
        for (spread += lines; spread >= steps; spread -= steps, ahead += 64) KV_PREFETCH(ahead);
        r = SKINNY_LOAD8(SKINNY_AT(w0, i)); a00 = _mm256_fmadd_ps(v0, r, a00); a01 = _mm256_fmadd_ps(v1, r, a01);
        r = SKINNY_LOAD8(SKINNY_AT(w1, i)); a10 = _mm256_fmadd_ps(v0, r, a10); a11 = _mm256_fmadd_ps(v1, r, a11);
        r = SKINNY_LOAD8(SKINNY_AT(w2, i)); a20 = _mm256_fmadd_ps(v0, r, a20); a21 = _mm256_fmadd_ps(v1, r, a21);
        r = SKINNY_LOAD8(SKINNY_AT(w3, i)); a30 = _mm256_fmadd_ps(v0, r, a30); a31 = _mm256_fmadd_ps(v1, r, a31);
    }
    __m256 acc[4][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
    for (int j = 0; j < 4; j++)
        for (int t = 0; t < 2; t++) {
            float *out = y + t * ldy + j;
            *out = finish(SKINNY_NAME(tail)(x + t * ldx, w, n + j, ldw, k, reduce8(acc[j][t])), alpha, beta, out);
        }
}

// Four weight rows by three activation rows: 12 accumulators, enough independent FMAs to cover
// the FMA latency on two pipes; 7 loads per 12 FMAs.
SKINNY_FN void SKINNY_NAME(tile4x3)(const float *x, ptrdiff_t ldx, const SKINNY_W *w, ptrdiff_t n, ptrdiff_t ldw,
                                    ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta, const char *ahead,
                                    ptrdiff_t lines) {
    ptrdiff_t end = k - k % 8, steps = end > 8 ? end / 8 : 1, spread = 0;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx;
    const SKINNY_W *w0 = SKINNY_ROW(w, n, ldw), *w1 = w0 + SKINNY_NEXTROW(ldw), *w2 = w1 + SKINNY_NEXTROW(ldw),
                   *w3 = w2 + SKINNY_NEXTROW(ldw);
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i), v2 = _mm256_loadu_ps(x2 + i), r;
        for (spread += lines; spread >= steps; spread -= steps, ahead += 64) KV_PREFETCH(ahead);
        r = SKINNY_LOAD8(SKINNY_AT(w0, i));
        a00 = _mm256_fmadd_ps(v0, r, a00); a01 = _mm256_fmadd_ps(v1, r, a01); a02 = _mm256_fmadd_ps(v2, r, a02);
        r = SKINNY_LOAD8(SKINNY_AT(w1, i));
        a10 = _mm256_fmadd_ps(v0, r, a10); a11 = _mm256_fmadd_ps(v1, r, a11); a12 = _mm256_fmadd_ps(v2, r, a12);
        r = SKINNY_LOAD8(SKINNY_AT(w2, i));
        a20 = _mm256_fmadd_ps(v0, r, a20); a21 = _mm256_fmadd_ps(v1, r, a21); a22 = _mm256_fmadd_ps(v2, r, a22);
        r = SKINNY_LOAD8(SKINNY_AT(w3, i));
        a30 = _mm256_fmadd_ps(v0, r, a30); a31 = _mm256_fmadd_ps(v1, r, a31); a32 = _mm256_fmadd_ps(v2, r, a32);
    }
    __m256 acc[4][3] = {{a00, a01, a02}, {a10, a11, a12}, {a20, a21, a22}, {a30, a31, a32}};
    for (int j = 0; j < 4; j++)
        for (int t = 0; t < 3; t++) {
            float *out = y + t * ldy + j;
            *out = finish(SKINNY_NAME(tail)(x + t * ldx, w, n + j, ldw, k, reduce8(acc[j][t])), alpha, beta, out);
        }
}

#if SKINNY_CONVERTS
// Two weight rows by four activation rows: 8 accumulators, each weight loaded (and converted)
// once for all four rows. Streams its rows from memory itself, prefetching `lines` cache lines
// from `ahead` (may be NULL) spread over its steps.
SKINNY_FN void SKINNY_NAME(tile2x4)(const float *x, ptrdiff_t ldx, const SKINNY_W *w, ptrdiff_t n, ptrdiff_t ldw,
                                    ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta, const char *ahead,
                                    ptrdiff_t lines) {
    ptrdiff_t end = k - k % 8, steps = end > 8 ? end / 8 : 1, spread = 0;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
    const SKINNY_W *w0 = SKINNY_ROW(w, n, ldw), *w1 = w0 + SKINNY_NEXTROW(ldw);
    for (ptrdiff_t i = 0; i < end; i += 8) {
        if (ahead) for (spread += lines; spread >= steps; spread -= steps, ahead += 64) KV_PREFETCH(ahead);
        __m256 r0 = SKINNY_LOAD8(SKINNY_AT(w0, i)), r1 = SKINNY_LOAD8(SKINNY_AT(w1, i)), v;
        v = _mm256_loadu_ps(x0 + i); a00 = _mm256_fmadd_ps(v, r0, a00); a10 = _mm256_fmadd_ps(v, r1, a10);
        v = _mm256_loadu_ps(x1 + i); a01 = _mm256_fmadd_ps(v, r0, a01); a11 = _mm256_fmadd_ps(v, r1, a11);
        v = _mm256_loadu_ps(x2 + i); a02 = _mm256_fmadd_ps(v, r0, a02); a12 = _mm256_fmadd_ps(v, r1, a12);
        v = _mm256_loadu_ps(x3 + i); a03 = _mm256_fmadd_ps(v, r0, a03); a13 = _mm256_fmadd_ps(v, r1, a13);
    }
    __m256 acc[2][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}};
    for (int j = 0; j < 2; j++)
        for (int t = 0; t < 4; t++) {
            float *out = y + t * ldy + j;
            *out = finish(SKINNY_NAME(tail)(x + t * ldx, w, n + j, ldw, k, reduce8(acc[j][t])), alpha, beta, out);
        }
}
#endif

// One weight row by one activation row: the edges, with the same arithmetic per element.
SKINNY_FN void SKINNY_NAME(tile1x1)(const float *x, const SKINNY_W *w, ptrdiff_t n, ptrdiff_t ldw, ptrdiff_t k,
                                    float *y, float alpha, float beta) {
    ptrdiff_t end = k - k % 8;
    const SKINNY_W *row = SKINNY_ROW(w, n, ldw);
    __m256 a = _mm256_setzero_ps();
    for (ptrdiff_t i = 0; i < end; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), SKINNY_LOAD8(SKINNY_AT(row, i)), a);
    *y = finish(SKINNY_NAME(tail)(x, w, n, ldw, k, reduce8(a)), alpha, beta, y);
}

// Decode (one activation row): four weight rows at a time, four independent accumulators; when
// `ahead` is given, the rows `ahead` rows further on are prefetched once per cache line.
SKINNY_FN void SKINNY_NAME(tile4x1)(const float *x, const SKINNY_W *w, ptrdiff_t n, ptrdiff_t ldw, ptrdiff_t k,
                                    float *y, float alpha, float beta, ptrdiff_t ahead) {
    ptrdiff_t end = k - k % 8;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const SKINNY_W *w0 = SKINNY_ROW(w, n, ldw), *w1 = w0 + SKINNY_NEXTROW(ldw), *w2 = w1 + SKINNY_NEXTROW(ldw),
                   *w3 = w2 + SKINNY_NEXTROW(ldw);
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (ahead && (i & (64 / sizeof(SKINNY_W) - 1)) == 0)   // once per cache line of each row
            for (int j = 0; j < 4; j++) KV_PREFETCH(w + (n + ahead + j) * ldw + i);
        a0 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w0, i)), a0);
        a1 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w1, i)), a1);
        a2 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w2, i)), a2);
        a3 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w3, i)), a3);
    }
    __m256 acc[4] = {a0, a1, a2, a3};
    for (int j = 0; j < 4; j++)
        y[j] = finish(SKINNY_NAME(tail)(x, w, n + j, ldw, k, reduce8(acc[j])), alpha, beta, y + j);
}

// Decode, eight weight rows at a time: eight independent FMA chains, which hide DRAM latency
// better than four (each row's arithmetic is unchanged). Row pointers and accumulators are named,
// not indexed. Float weights: the loop holds nothing else, so every load addresses its row's own
// register plus the index; with a software prefetch in the loop clang ran out of registers and
// derived each row's address from the previous one's, a chain of adds in front of every load
// (two cores then streamed 25-26 GB/s from DRAM against 26-28 without it on Zen 1, 2 MiB pages;
// the prefetch itself changed nothing). Half weights, which convert every load and so keep fewer
// misses in flight, still gain from prefetching the `lines` cache lines at `ahead` spread over the
// steps (decode on `base` about 8% faster with it). Packed, the next tile's bytes are contiguous and
// 64 elements a step, so each step prefetches its own lines with no branch in the loop (a tile with
// nothing after it prefetches its own rows), and rows 1-3 of each group are constant offsets from
// its row 0: with a branchy prefetch loop and eight row pointers clang had reloaded pointers from
// the stack and copied all eight accumulators every step (one core in L2: 4.9 G halfs/s, now 6.2,
// a bare convert-and-add loop 6.5; two cores from DRAM: 0.80 of a float sum's read rate, now 0.93).
#if SKINNY_CONVERTS
SKINNY_FN void SKINNY_NAME(tile8x1)(const float *x, const SKINNY_W *w, ptrdiff_t n, ptrdiff_t ldw, ptrdiff_t k,
                                    float *y, float alpha, float beta, const char *ahead, ptrdiff_t lines) {
    ptrdiff_t steps = k >= 16 ? k / 8 : 1, spread = 0;
#if SKINNY_PACKED
    (void)steps, (void)spread, (void)lines;   // packed: each step prefetches its own fixed lines
#endif
#else
SKINNY_FN __attribute__((noinline)) void SKINNY_NAME(tile8x1)(const float *x, const SKINNY_W *w, ptrdiff_t n, ptrdiff_t ldw,
                                                              ptrdiff_t k, float *y, float alpha, float beta,
                                                              const char *ahead, ptrdiff_t lines) {
    (void)ahead, (void)lines;
#endif
    ptrdiff_t end = k - k % 8;
#if SKINNY_CONVERTS && SKINNY_PACKED
    if (!ahead) ahead = (const char *)SKINNY_ROW(w, n, ldw);   // no branch in the loop: prefetch own bytes
#endif
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const SKINNY_W *w0 = SKINNY_ROW(w, n, ldw), *w1 = w0 + SKINNY_NEXTROW(ldw), *w2 = w1 + SKINNY_NEXTROW(ldw),
                   *w3 = w2 + SKINNY_NEXTROW(ldw), *w4 = SKINNY_ROW(w, n + 4, ldw), *w5 = w4 + SKINNY_NEXTROW(ldw),
                   *w6 = w5 + SKINNY_NEXTROW(ldw), *w7 = w6 + SKINNY_NEXTROW(ldw);
#if !SKINNY_CONVERTS
    // Opaque to the optimiser: otherwise clang re-derives each row's address from the last one's.
    __asm__("" : "+r"(w1), "+r"(w2), "+r"(w3), "+r"(w4), "+r"(w5), "+r"(w6), "+r"(w7));
#endif
    for (ptrdiff_t i = 0; i < end; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
#if SKINNY_CONVERTS && SKINNY_PACKED
        for (int l = 0; l < (int)sizeof(SKINNY_W); l++) KV_PREFETCH(ahead + i * 8 * sizeof(SKINNY_W) + 64 * l);
#elif SKINNY_CONVERTS
        if (ahead) for (spread += lines; spread >= steps; spread -= steps, ahead += 64) KV_PREFETCH(ahead);
#endif
        a0 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w0, i)), a0);
        a1 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w1, i)), a1);
        a2 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w2, i)), a2);
        a3 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w3, i)), a3);
        a4 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w4, i)), a4);
        a5 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w5, i)), a5);
        a6 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w6, i)), a6);
        a7 = _mm256_fmadd_ps(v, SKINNY_LOAD8(SKINNY_AT(w7, i)), a7);
    }
    __m256 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    for (int j = 0; j < 8; j++)
        y[j] = finish(SKINNY_NAME(tail)(x, w, n + j, ldw, k, reduce8(acc[j])), alpha, beta, y + j);
}

// The bytes of `count` rows, as the layout stores them: a contiguous range from a row that starts a
// group, for a whole number of groups (packed), or always (plain rows).
#define SKINNY_ROWBYTES(count) ((count) * ldw * (ptrdiff_t)sizeof(SKINNY_W))

// `after` (`afterBytes` long, may be NULL) is memory the caller reads next: the last group of
// weight rows prefetches it instead of rows beyond the matrix.
SKINNY_FN void SKINNY_NAME(avx2)(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const SKINNY_W *w, ptrdiff_t ldw,
                                 ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta,
                                 const char *after, ptrdiff_t afterBytes) {
    ptrdiff_t n = 0;
#if SKINNY_CONVERTS
    // Where converting a weight costs more than streaming it (F16C on 128-bit units), four rows
    // sharing each conversion beat tiles of three and two that convert every weight twice. Each
    // pair of rows prefetches the bytes of the pair `kv_prefetch_rows` rows on (plain rows) or
    // its share of the next group (packed rows: a group is one contiguous run).
    if (rows >= 4) {
        for (; n + 2 <= outputs; n += 2) {
#if SKINNY_PACKED
            const char *ahead = n + 2 * SKINNY_GROUP <= outputs ? (const char *)(w + (n + SKINNY_GROUP) * ldw) : NULL;
#else
            const char *ahead = n + kv_prefetch_rows + 2 <= outputs ? (const char *)(w + (n + kv_prefetch_rows) * ldw) : NULL;
#endif
            SKINNY_NAME(tile2x4)(x, ldx, w, n, ldw, k, y + n, ldy, alpha, beta, ahead, kv_prefetch_rows ? SKINNY_ROWBYTES(2) / 64 : 0);
        }
        for (; n < outputs; n++)
            for (ptrdiff_t t = 0; t < 4; t++) SKINNY_NAME(tile1x1)(x + t * ldx, w, n, ldw, k, y + t * ldy + n, alpha, beta);
        if (rows == 4) return;
        x += 4 * ldx;
        y += 4 * ldy;
        rows -= 4;
        n = 0;
    }
#endif
    for (; n + 4 <= outputs; n += 4) {
        if (rows == 1 && n + 8 <= outputs) {
            // Half weights prefetch the next eight rows' bytes (contiguous in either layout: whole groups).
            // The last tile prefetches `after` when it holds as many bytes.
            const char *ahead = !kv_prefetch_rows ? NULL : n + 16 <= outputs ? (const char *)(w + (n + 8) * ldw)
                              : n + 8 == outputs && afterBytes >= SKINNY_ROWBYTES(8) ? after : NULL;
            SKINNY_NAME(tile8x1)(x, w, n, ldw, k, y + n, alpha, beta, ahead, SKINNY_ROWBYTES(8) / 64);
            n += 4;   // and 4 more by the loop
            continue;
        }
        if (rows == 1) {
            SKINNY_NAME(tile4x1)(x, w, n, ldw, k, y + n, alpha, beta,
                                 !SKINNY_PACKED && n + kv_prefetch_rows + 4 <= outputs ? kv_prefetch_rows : 0);
            continue;
        }
        // Rows in threes and twos (any count from 2 is a sum of them): no single row re-reads the
        // four weight rows on its own. Only the first tile reads them from DRAM, so each tile also
        // prefetches its share of the bytes read next, spread evenly over its iterations: the
        // memory then streams while the later tiles compute (from DRAM, 15 rows ran at 0.6 of the
        // in-cache speed without it, 0.95 with it, on a Zen 3). The next four rows are one
        // contiguous run in both layouts (a packed group is four rows).
        ptrdiff_t tiles = (rows + 2) / 3;
        const char *next = n + 8 <= outputs ? (const char *)(w + (n + 4) * ldw) : after;
        ptrdiff_t nextBytes = n + 8 <= outputs ? SKINNY_ROWBYTES(4) : n + 4 == outputs && after ? afterBytes : 0;
        ptrdiff_t share = (nextBytes / 64 + tiles - 1) / tiles;
        for (ptrdiff_t t = 0, tile = 0; t < rows; tile++) {
            ptrdiff_t left = rows - t;
            if (left == 2 || left == 4) {
                SKINNY_NAME(tile4x2)(x + t * ldx, ldx, w, n, ldw, k, y + t * ldy + n, ldy, alpha, beta, next + 64 * tile * share, share);
                t += 2;
            } else {
                SKINNY_NAME(tile4x3)(x + t * ldx, ldx, w, n, ldw, k, y + t * ldy + n, ldy, alpha, beta, next + 64 * tile * share, share);
                t += 3;
            }
        }
    }
    for (; n < outputs; n++)
        for (ptrdiff_t t = 0; t < rows; t++)
            SKINNY_NAME(tile1x1)(x + t * ldx, w, n, ldw, k, y + t * ldy + n, alpha, beta);
}
#undef SKINNY_ROWBYTES
#undef SKINNY_FN
#undef SKINNY_INLINE
#endif
