// A fast 64-bit checksum for the prefix store's files: four independent multiply-rotate lanes
// over 32-byte stripes (so a core keeps four multiplies in flight), then the tail byte by byte
// and a final avalanche. It detects truncation and corruption; it is not a MAC (encrypted files
// are authenticated by AES-GCM instead).

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

uint64_t kv_checksum64(const void *data, size_t count) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t a = kv_prime_a + kv_prime_b, b = kv_prime_b, c = 0, d = 0 - kv_prime_a;
    size_t i = 0;
    for (; i + 32 <= count; i += 32) {
        a = lane(a, load_le64(p + i));
        b = lane(b, load_le64(p + i + 8));
        c = lane(c, load_le64(p + i + 16));
        d = lane(d, load_le64(p + i + 24));
    }
    uint64_t h = rotl64(a, 1) + rotl64(b, 7) + rotl64(c, 12) + rotl64(d, 18) + (uint64_t)count * kv_prime_c;
    for (; i + 8 <= count; i += 8) h = rotl64(h ^ lane(0, load_le64(p + i)), 27) * kv_prime_a + kv_prime_c;
    for (; i < count; i++) h = rotl64(h ^ (p[i] * kv_prime_c), 11) * kv_prime_a;
    h ^= h >> 33;
    h *= kv_prime_b;
    h ^= h >> 29;
    h *= kv_prime_c;
    h ^= h >> 32;
    return h;
}
