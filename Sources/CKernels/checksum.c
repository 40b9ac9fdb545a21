// A fast 64-bit checksum for the prefix store's files: four independent multiply-rotate lanes
// over 32-byte stripes (so a core keeps four multiplies in flight), then the tail byte by byte
// and a final avalanche; computed in pieces, it gives the value of the whole. It detects
// truncation and corruption; it is not a MAC (encrypted files are authenticated by AES-GCM).

#include "CKernels.h"

#include <stdint.h>
#include <string.h>

static const uint64_t kv_prime_a = 0x9E3779B185EBCA87ull;   // odd constants with well-mixed bits
static const uint64_t kv_prime_b = 0xC2B2AE3D27D4EB4Full;
static const uint64_t kv_prime_c = 0x165667B19E3779F9ull;

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t lane(uint64_t acc, uint64_t word) { return rotl64(acc + word * kv_prime_b, 31) * kv_prime_a; }

static void stripes(uint64_t lanes[4], const uint8_t *p, size_t n32) {
    uint64_t a = lanes[0], b = lanes[1], c = lanes[2], d = lanes[3];
    for (size_t i = 0; i < n32 * 32; i += 32) {
        a = lane(a, load_le64(p + i));
        b = lane(b, load_le64(p + i + 8));
        c = lane(c, load_le64(p + i + 16));
        d = lane(d, load_le64(p + i + 24));
    }
    lanes[0] = a, lanes[1] = b, lanes[2] = c, lanes[3] = d;
}

void kv_checksum64_begin(kv_checksum_state *state) {
    state->lanes[0] = kv_prime_a + kv_prime_b;
    state->lanes[1] = kv_prime_b;
    state->lanes[2] = 0;
    state->lanes[3] = 0 - kv_prime_a;
    state->count = 0;
    state->pendingCount = 0;
}

void kv_checksum64_update(kv_checksum_state *state, const void *data, size_t count) {
    const uint8_t *p = (const uint8_t *)data;
    state->count += count;
    if (state->pendingCount > 0) {   // finish the stripe an earlier piece began
        size_t take = 32 - state->pendingCount < count ? 32 - state->pendingCount : count;
        memcpy(state->pending + state->pendingCount, p, take);
        state->pendingCount += take, p += take, count -= take;
        if (state->pendingCount < 32) return;
        stripes(state->lanes, state->pending, 1);
        state->pendingCount = 0;
    }
    stripes(state->lanes, p, count / 32);
    memcpy(state->pending, p + count / 32 * 32, count % 32);
    state->pendingCount = count % 32;
}

uint64_t kv_checksum64_end(const kv_checksum_state *state) {
    const uint64_t *l = state->lanes;
    const uint8_t *p = state->pending;
    size_t n = state->pendingCount, i = 0;
    uint64_t h = rotl64(l[0], 1) + rotl64(l[1], 7) + rotl64(l[2], 12) + rotl64(l[3], 18) + state->count * kv_prime_c;
    for (; i + 8 <= n; i += 8) h = rotl64(h ^ lane(0, load_le64(p + i)), 27) * kv_prime_a + kv_prime_c;
    for (; i < n; i++) h = rotl64(h ^ (p[i] * kv_prime_c), 11) * kv_prime_a;
    h ^= h >> 33;
    h *= kv_prime_b;
    h ^= h >> 29;
    h *= kv_prime_c;
    h ^= h >> 32;
    return h;
}

uint64_t kv_checksum64(const void *data, size_t count) {
    kv_checksum_state state;
    kv_checksum64_begin(&state);
    kv_checksum64_update(&state, data, count);
    return kv_checksum64_end(&state);
}
