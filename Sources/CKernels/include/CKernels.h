#ifndef CKERNELS_H
#define CKERNELS_H
// Elementwise kernels of LMRuntime that Swift cannot vectorise past the baseline
// instruction set (SSE2 on x86-64, without FMA). Each entry point picks, once per
// process, an AVX2+FMA body when the CPU has one, else a portable body; the portable
// bodies are exported too so tests can check both against the same definitions.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Replaces x[i] by exp(x[i] - max(x)) for i < n (n >= 1) and returns the sum of the results.
/// The same as kv_exp_sub_sum(x, n, kv_max(x, n)), bit for bit.
float kv_exp_shifted_sum(float *x, ptrdiff_t n);
/// The largest of x[0..<n] (n >= 1).
float kv_max(const float *x, ptrdiff_t n);
/// Replaces x[i] by exp(x[i] - shift) for i < n and returns the sum of the results
/// (a softmax over several tiles of scores shares one shift).
float kv_exp_sub_sum(float *x, ptrdiff_t n, float shift);
/// kv_exp_sub_sum on two rows at once (x0 and x1 must not overlap): sums[0] and sums[1] are the two
/// calls' returns and every element the same bits; the two rows' exponentials overlap in the pipeline.
void kv_exp_sub_sum_pair(float *x0, ptrdiff_t n0, float shift0, float *x1, ptrdiff_t n1, float shift1, float sums[2]);
/// gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i], for i < n.
void kv_swiglu(float *gate, const float *up, ptrdiff_t n);
/// dst[i] = weight[i] * x[i] / sqrt(mean(x²) + epsilon), for i < n (n >= 1); dst may be x.
void kv_rmsnorm(float *dst, const float *x, const float *weight, ptrdiff_t n, float epsilon);

/// The sum of x[0..<n]: a pure streaming read (four independent accumulators per lane), what a
/// memory-bandwidth ceiling times. Not for numerics: the order of additions is the kernel's.
float kv_sum(const float *x, ptrdiff_t n);
/// kv_sum reading x as `streams` streams (1 to 8; clamped): x cut into that many equal parts read
/// in lockstep. kv_sum reads two. Which count streams fastest depends on the machine.
float kv_sum_streams(const float *x, ptrdiff_t n, int streams);

/// y[t*ldy + n] = alpha * dot(x[t*ldx ..], w[n*ldw ..]) + beta * y[t*ldy + n] over k elements, for
/// t < rows and n < outputs (beta 0: y is only written). For few activation rows: each weight
/// row is streamed once. Every element's arithmetic is the same whatever tile computes it.
void kv_skinny_gemm(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t ldw,
                    ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);

/// kv_skinny_gemm with IEEE half weights (w holds the bits, ldw counts halfs). Each weight is
/// converted to float exactly, so every element equals kv_skinny_gemm's on the converted weights
/// when both run the same body (F16C with AVX2+FMA, or the portable one).
void kv_skinny_gemm_f16(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t ldw,
                        ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
/// kv_skinny_gemm on half weights converted `chunkRows` weight rows at a time into `scratch`
/// (floats, rows `ldscratch` apart, at least `k` wide): the same arithmetic as kv_skinny_gemm on the
/// converted weights, each weight row converted once however many activation rows there are, and
/// the next chunk's halfs prefetched while the current one is multiplied.
/// With `packed`, `w` is packed (kv_pack8_f16, ldw == k), chunkRows a multiple of G, and each chunk
/// is converted into `scratch` packed, k floats per row. `after` (`afterBytes`, may be NULL) is
/// what the caller reads next, prefetched while the last chunk is multiplied.
void kv_skinny_gemm_f16_chunked(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t ldw,
                                ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta,
                                float *scratch, ptrdiff_t ldscratch, ptrdiff_t chunkRows, int packed,
                                const void *after, ptrdiff_t afterBytes);

/// Weights packed for streaming (kv_pack8_f32): rows in groups of G = kv_pack_group() (rows a
/// multiple of G), each group stored as its k/8 chunks, chunk c holding the G rows' elements
/// 8c ..< 8c+8 row after row, then the G rows' last k % 8 elements row after row. A group is Gk
/// contiguous elements that a tile reads front to back as one stream, where plain rows make one
/// stream per row, k elements apart. Every output element gets the same arithmetic as on plain rows.
void kv_skinny_gemm_packed(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t outputs,
                           ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
/// kv_skinny_gemm_f16 on packed half weights.
void kv_skinny_gemm_f16_packed(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t outputs,
                               ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
/// kv_skinny_gemm_f16_packed for weights holding no infinity or NaN (kv_count_nonfinite_halfs),
/// with the same bits: a decode step (one activation row, every |x| below 2^16, k up to 8192) may
/// then convert half of each eight-row tile with integer operations instead of F16C, on CPUs
/// where that is faster (kv_set_half_split_tile).
void kv_skinny_gemm_f16_packed_finite(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w,
                                      ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
/// Turns kv_skinny_gemm_f16_packed_finite's integer-converting decode tile on (1) or off (0) and
/// returns the previous choice. Default: on for the Zen 1 family (F16C on 128-bit units), off
/// elsewhere; KVSESSION_HALF_SPLIT=0 or 1 overrides it. Results are the same bits either way.
int kv_set_half_split_tile(int on);
/// The packed entry points above for a caller that reads `afterBytes` at `after` next (the rows
/// that follow `w`'s, typically): the last rows prefetch those bytes instead of nothing, so a
/// matrix multiplied in consecutive calls streams as in one. Same results; `after` may be NULL.
void kv_skinny_gemm_packed_then(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t outputs,
                                ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta, const void *after,
                                ptrdiff_t afterBytes);
void kv_skinny_gemm_f16_packed_then(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t outputs,
                                    ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta, const void *after,
                                    ptrdiff_t afterBytes);
void kv_skinny_gemm_f16_packed_finite_then(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w,
                                           ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha,
                                           float beta, const void *after, ptrdiff_t afterBytes);
/// Turns the AVX-512 bodies on (1) or off (0) and returns the previous choice: the tiles on packed
/// weights (several activation rows on float32 and half, decode on float32), the attention's
/// weighted-rows products (kv_weighted_rows_add, and the few-query scores and values) and the
/// softmax exponentials (kv_exp_sub_sum). A CPU without AVX-512 F, DQ and VL stays off. Default: on
/// where the CPU has them; KVSESSION_AVX512=0 or 1 overrides it. Each element gets the AVX2 body's
/// arithmetic either way, so results are the same bits.
int kv_set_skinny_avx512(int on);
/// With the AVX-512 bodies on, makes tiles of more than twelve activation rows on packed float32
/// weights take two groups of weight rows at a time, in tiles of three to six rows (1), or one group, in
/// tiles of up to twelve (0); returns the previous choice. Default: 1 on Intel's Emerald Rapids
/// (measured there), else 0; KVSESSION_PAIR_TILES=0 or 1 overrides it. The same bits either way.
int kv_set_skinny_pair_tiles(int on);
/// 1 when tiles of more than twelve float32 activation rows take two groups at a time (with the
/// AVX-512 bodies on and kv_set_skinny_pair_tiles's choice on), else 0.
int kv_uses_skinny_pair_tiles(void);
/// With the AVX-512 bodies on, makes few-query attention's weighted-values product over 12 or more
/// stacked query rows take each key tile 32 keys at a time (1) instead of reading the value rows from
/// a dense copy (0); returns the previous choice. Default: 1 on Intel's Emerald Rapids (measured
/// there), else 0; KVSESSION_VALUE_CHUNKS=0 or 1 overrides it. The same bits either way.
int kv_set_attention_value_chunks(int on);
/// 1 when few-query attention's weighted values take 32-key chunks (the AVX-512 bodies on and
/// kv_set_attention_value_chunks's choice on), else 0.
int kv_uses_attention_value_chunks(void);
/// With the AVX-512 bodies on, makes a decode step (one activation row, packed float32 or half
/// weights) read one group of rows at a time front to back, one stream a thread (1), or, on float32,
/// two groups side by side (0; halfs then take the AVX2 eight-row tile); returns the previous choice.
/// Default: one stream on the AMD Zen 4 family, where it measured faster; KVSESSION_DECODE_ONE_STREAM=0
/// or 1 overrides it. Each row gets the AVX2 body's arithmetic either way, so results are the same bits.
int kv_set_decode_one_stream(int on);
/// 1 when decode steps are set to read one stream a thread (they do when the AVX-512 bodies are on).
int kv_decodes_one_stream(void);
/// 1 when the CPU can run the AVX-512 tiles (whether or not they are switched on), else 0.
int kv_has_avx512(void);
/// 1 when the AVX-512 tiles are switched on (and so run), else 0.
int kv_uses_skinny_avx512(void);
/// Sends the kernels' software prefetches (weights and key/value rows ahead of the tiles' loads)
/// into L2 only (1) or into L1 (0) and returns the previous choice. Default: L2 on the AMD Zen 4
/// family, where an L1 prefetch from DRAM holds one of the core's few L1 miss buffers and a tile that
/// computes while it streams kept too few lines in flight, and on Intel Emerald Rapids (measured
/// faster there too); L1 elsewhere. KVSESSION_PREFETCH_L2=0 or 1 overrides it. A hint only: no
/// result changes.
int kv_set_prefetch_l2(int on);
/// 1 on the CPUs whose prefetches go to L2 unless KVSESSION_PREFETCH_L2 says otherwise, else 0.
int kv_prefetch_l2_by_default(void);
/// 1 when the kernels' software prefetches go to L2 only, else 0.
int kv_prefetches_to_l2(void);
/// The Zen generation of this AMD CPU (1 for Zen and Zen+, 2, 3, 4 or 5), or 0 for any other CPU,
/// read from CPUID itself (the defaults above that name a Zen core follow it): the compiler
/// runtime's __builtin_cpu_is knows only the cores of its release (Debian's called a Zen 4, family
/// 25 model 17, "znver3").
int kv_amd_zen_generation(void);
/// 1 on Intel's Emerald Rapids (family 6, model 207), read from CPUID, else 0.
int kv_intel_emerald_rapids(void);
/// Where a DYNAMIC_ARCH OpenBLAS fell back to its generic Prescott kernels on a CPU it does not
/// know although the CPU runs AVX2 or AVX-512, this library made it choose again by instruction set
/// when it loaded (kv_blas_core_for_instructions): returns "Prescott" then, the kernels replaced;
/// otherwise, and always when OPENBLAS_CORETYPE is set, NULL.
const char *kv_blas_replaced_core(void);
/// Whether OpenBLAS's own worker threads were running when kv_blas_replaced_core's replacement
/// swapped the kernel table: 0 (they are stopped first, so none can initialise the table beside it),
/// 1 if they were, -1 when nothing was replaced or the library does not say (no blas_server_avail).
int kv_blas_workers_ran_at_replacement(void);
/// The kernel set the replacement (kv_blas_replaced_core) chooses on this CPU: the best of
/// Cooperlake, SkylakeX and Haswell whose instructions the CPU and system support and that the
/// loaded OpenBLAS has, or NULL (below AVX2, no DYNAMIC_ARCH OpenBLAS, not x86-64 Linux).
const char *kv_blas_core_for_instructions(void);
/// How many of the n halfs at w are infinities or NaNs.
ptrdiff_t kv_count_nonfinite_halfs(const uint16_t *w, ptrdiff_t n);
/// Packs `rows` (a multiple of G) dense rows of k elements in place; `group` holds Gk elements.
void kv_pack8_f32(float *w, ptrdiff_t rows, ptrdiff_t k, float *group);
void kv_pack8_f16(uint16_t *w, ptrdiff_t rows, ptrdiff_t k, uint16_t *group);
/// Rows per packing group (4).
ptrdiff_t kv_pack_group(void);
/// Where element (n, i) of a packed matrix with k columns lives.
ptrdiff_t kv_packed_index(ptrdiff_t n, ptrdiff_t i, ptrdiff_t k);
/// Rows first ..< first+rows of packed `w` (k columns) as plain float rows, ldd apart, into dst.
void kv_unpack8_f32(float *dst, ptrdiff_t ldd, const float *w, ptrdiff_t first, ptrdiff_t rows, ptrdiff_t k);
void kv_unpack8_f16(float *dst, ptrdiff_t ldd, const uint16_t *w, ptrdiff_t first, ptrdiff_t rows, ptrdiff_t k);
/// dst[i] = the float value of IEEE half src[i], for i < n (exact).
void kv_halfs_to_floats(float *dst, const uint16_t *src, ptrdiff_t n);
/// The sum of the float values of the n IEEE halfs at w, in an order of its own (not
/// reproducible across bodies): each half loaded, converted and added once, nothing else. Timed
/// over halfs held in cache it is the machine's conversion ceiling, the rate no kernel streaming
/// half weights can beat (`kvbench kernels`).
float kv_sum_halfs(const uint16_t *w, ptrdiff_t n);
/// The float value of IEEE half h (exact; NaN payloads kept).
float kv_half_to_float(uint16_t h);

/// s[r*lds + j] = scale * dot(q[r*ldq ..], k[j*ldk ..]) over d elements, for r < rows and j < n: a
/// few queries against a tile of keys. Each dot product sums eight lanes of fused multiply-adds
/// in element order, then the lanes in one fixed tree, then the elements beyond the last eight,
/// the same on every body and in every tile.
void kv_attention_scores(const float *q, ptrdiff_t ldq, ptrdiff_t rows, const float *k, ptrdiff_t ldk, ptrdiff_t n,
                         ptrdiff_t d, float *s, ptrdiff_t lds, float scale);

/// o[r*ldo + c] += sum over j < n of p[r*ldp + j] * v[j*ldv + c], for r < rows and c < cols: a few
/// rows of attention weights times a tile of value rows, each output element accumulated with
/// one fused multiply-add per key, in key order.
void kv_weighted_rows_add(float *o, ptrdiff_t ldo, ptrdiff_t rows, const float *p, ptrdiff_t ldp,
                          const float *v, ptrdiff_t ldv, ptrdiff_t n, ptrdiff_t cols);

/// One part of causal grouped-query attention for `positions` consecutive queries from position
/// firstPosition. Query head j's query at position firstPosition + p is q[p*ldq + j*headDim ..];
/// K/V head h (columns h*headDim of k and v) serves query heads h*group ..< (h+1)*group, whose
/// queries are stacked, row r = i*positions + p for query head h*group + i, and multiplied by
/// `scale`. Walks key rows [from, to) (rows ldkv apart; tiles of `tile` keys from `from`, each
/// read for every head while in cache) with an online softmax, each row seeing the keys up to its
/// position, and leaves per head and stacked row its maximum score and sum of exponentials in
/// stats[h*statsHeadStride + 2r ..+1] (-inf and 0 when the row sees none of these keys) and its
/// unnormalised output in o[h*oHeadStride + r*ldo ..] (zero when it sees none). `work` holds
/// kv_attend_work_floats(kvHeads, group * positions, headDim, tile) floats. While one tile computes,
/// the next tile's key and value rows are prefetched, up to row `through` (≥ `to`: the last tile
/// prefetches the first of a part the caller runs next); `fetched` says whether the first tile was
/// so prefetched by the call before, and when it was not, the first head fetches it while it
/// computes (AVX2 body; KVSESSION_ATTENTION_PREFETCH=0 stops all of it). Results never depend on it.
void kv_attend_keys(const float *q, ptrdiff_t ldq, ptrdiff_t positions, ptrdiff_t group, ptrdiff_t kvHeads,
                    ptrdiff_t headDim, ptrdiff_t firstPosition, const float *k, const float *v, ptrdiff_t ldkv,
                    ptrdiff_t from, ptrdiff_t to, ptrdiff_t through, int fetched, ptrdiff_t tile, float scale, float *work,
                    float *stats, ptrdiff_t statsHeadStride, float *o, ptrdiff_t ldo, ptrdiff_t oHeadStride);
/// The scratch kv_attend_keys needs, in floats.
ptrdiff_t kv_attend_work_floats(ptrdiff_t kvHeads, ptrdiff_t rows, ptrdiff_t headDim, ptrdiff_t tile);

/// Merges `parts` results of kv_attend_keys over consecutive key ranges (part i's stats at
/// stats + i*statsPartStride, its outputs at o + i*oPartStride, rows ldo apart), in part order,
/// into normalised attention outputs: stacked row r goes to out + (r % blockRows)*ldout +
/// (r / blockRows)*headDim (the row of its position, the columns of its head).
void kv_attend_merge(ptrdiff_t parts, const float *stats, ptrdiff_t statsPartStride, const float *o,
                     ptrdiff_t oPartStride, ptrdiff_t ldo, ptrdiff_t rows, ptrdiff_t headDim, ptrdiff_t blockRows,
                     float *out, ptrdiff_t ldout);

/// The portable bodies (no instruction-set extensions).
float kv_exp_shifted_sum_portable(float *x, ptrdiff_t n);
float kv_max_portable(const float *x, ptrdiff_t n);
float kv_sum_portable(const float *x, ptrdiff_t n);
void kv_skinny_gemm_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t ldw,
                             ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
void kv_skinny_gemm_f16_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t ldw,
                                 ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
void kv_skinny_gemm_packed_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t outputs,
                                    ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
void kv_skinny_gemm_f16_packed_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w,
                                        ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
void kv_halfs_to_floats_portable(float *dst, const uint16_t *src, ptrdiff_t n);
float kv_sum_halfs_portable(const uint16_t *w, ptrdiff_t n);
void kv_attention_scores_portable(const float *q, ptrdiff_t ldq, ptrdiff_t rows, const float *k, ptrdiff_t ldk,
                                  ptrdiff_t n, ptrdiff_t d, float *s, ptrdiff_t lds, float scale);
void kv_weighted_rows_add_portable(float *o, ptrdiff_t ldo, ptrdiff_t rows, const float *p, ptrdiff_t ldp,
                                   const float *v, ptrdiff_t ldv, ptrdiff_t n, ptrdiff_t cols);
float kv_exp_sub_sum_portable(float *x, ptrdiff_t n, float shift);
void kv_swiglu_portable(float *gate, const float *up, ptrdiff_t n);
void kv_rmsnorm_portable(float *dst, const float *x, const float *weight, ptrdiff_t n, float epsilon);
void kv_attend_merge_portable(ptrdiff_t parts, const float *stats, ptrdiff_t statsPartStride, const float *o,
                              ptrdiff_t oPartStride, ptrdiff_t ldo, ptrdiff_t rows, ptrdiff_t headDim, ptrdiff_t blockRows,
                              float *out, ptrdiff_t ldout);

/// A 64-bit checksum of `count` bytes (the prefix store's file check): any change of length
/// or content changes it with overwhelming probability. Not a MAC.
uint64_t kv_checksum64(const void *data, size_t count);

/// The state of a checksum computed in pieces: `begin`, `update` any number of times with
/// consecutive pieces of any sizes, then `end` gives what ``kv_checksum64`` gives for the
/// concatenation.
typedef struct {
    uint64_t lanes[4];
    uint64_t count;        ///< bytes seen so far
    uint8_t pending[32];   ///< bytes of an unfinished 32-byte stripe
    size_t pendingCount;
} kv_checksum_state;
void kv_checksum64_begin(kv_checksum_state *state);
void kv_checksum64_update(kv_checksum_state *state, const void *data, size_t count);
uint64_t kv_checksum64_end(const kv_checksum_state *state);

/// A band of `chunks` chunks of work, none claimed yet, in `word` (chunks < 2^32).
void kv_band_reset(uint64_t *word, int64_t chunks);
/// The band's owner claims the first half (at least one) of its unclaimed chunks: returns the first
/// chunk and sets `count`, or returns -1 when none is left. Atomic against every other claim.
int64_t kv_band_claim_front(uint64_t *word, int64_t *count);
/// Another thread claims the last half (at least one) of the band's unclaimed chunks, as
/// kv_band_claim_front does the first.
int64_t kv_band_claim_back(uint64_t *word, int64_t *count);

/// 1 when the entry points run the AVX2+FMA bodies, else 0.
int kv_uses_avx2(void);
/// 1 when the half-weight entry points run the AVX2+FMA+F16C bodies, else 0.
int kv_uses_f16c(void);

#ifdef __cplusplus
}
#endif

#endif
