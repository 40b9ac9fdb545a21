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
/// gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i], for i < n.
void kv_swiglu(float *gate, const float *up, ptrdiff_t n);
/// dst[i] = weight[i] * x[i] / sqrt(mean(x²) + epsilon), for i < n (n >= 1); dst may be x.
void kv_rmsnorm(float *dst, const float *x, const float *weight, ptrdiff_t n, float epsilon);

/// The sum of x[0..<n]: a pure streaming read (four independent accumulators per lane), what a
/// memory-bandwidth ceiling times. Not for numerics: the order of additions is the kernel's.
float kv_sum(const float *x, ptrdiff_t n);

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
void kv_skinny_gemm_f16_chunked(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t ldw,
                                ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta,
                                float *scratch, ptrdiff_t ldscratch, ptrdiff_t chunkRows);
/// dst[i] = the float value of IEEE half src[i], for i < n (exact).
void kv_halfs_to_floats(float *dst, const uint16_t *src, ptrdiff_t n);
/// The float value of IEEE half h (exact; NaN payloads kept).
float kv_half_to_float(uint16_t h);

/// The portable bodies (no instruction-set extensions).
float kv_exp_shifted_sum_portable(float *x, ptrdiff_t n);
float kv_max_portable(const float *x, ptrdiff_t n);
float kv_sum_portable(const float *x, ptrdiff_t n);
void kv_skinny_gemm_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const float *w, ptrdiff_t ldw,
                             ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
void kv_skinny_gemm_f16_portable(const float *x, ptrdiff_t ldx, ptrdiff_t rows, const uint16_t *w, ptrdiff_t ldw,
                                 ptrdiff_t outputs, ptrdiff_t k, float *y, ptrdiff_t ldy, float alpha, float beta);
void kv_halfs_to_floats_portable(float *dst, const uint16_t *src, ptrdiff_t n);
float kv_exp_sub_sum_portable(float *x, ptrdiff_t n, float shift);
void kv_swiglu_portable(float *gate, const float *up, ptrdiff_t n);
void kv_rmsnorm_portable(float *dst, const float *x, const float *weight, ptrdiff_t n, float epsilon);

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

/// 1 when the entry points run the AVX2+FMA bodies, else 0.
int kv_uses_avx2(void);
/// 1 when the half-weight entry points run the AVX2+FMA+F16C bodies, else 0.
int kv_uses_f16c(void);

#ifdef __cplusplus
}
#endif

#endif
