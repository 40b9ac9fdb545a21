// Claims on a band of work shared by its owner and by threads that finished their own band.
// The band's unclaimed chunks [next, end) live in one 64-bit word (next in the high half), so a
// claim is one compare-and-swap. The owner takes from the front, which keeps its reads one forward
// stream across claims; a thief takes from the back, the chunks the owner would have reached last.
// Each takes half of what is left (at least one chunk): the owner claims a few large runs while
// it is alone, and the two sides shrink what is left between them towards a single chunk.

#include "CKernels.h"

static inline uint64_t pack(uint64_t next, uint64_t end) { return next << 32 | end; }

void kv_band_reset(uint64_t *word, int64_t chunks) {
    __atomic_store_n(word, pack(0, (uint64_t)chunks), __ATOMIC_RELAXED);
}

static int64_t claim(uint64_t *word, int fromBack, int64_t *count) {
    uint64_t old = __atomic_load_n(word, __ATOMIC_RELAXED);
    for (;;) {
        int64_t next = (int64_t)(old >> 32), end = (int64_t)(old & 0xffffffffu), left = end - next;
        if (left <= 0) return -1;
        int64_t take = left > 1 ? left / 2 : 1;
        uint64_t desired = fromBack ? pack((uint64_t)next, (uint64_t)(end - take)) : pack((uint64_t)(next + take), (uint64_t)end);
        if (__atomic_compare_exchange_n(word, &old, desired, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            *count = take;
            return fromBack ? end - take : next;
        }
    }
}

int64_t kv_band_claim_front(uint64_t *word, int64_t *count) { return claim(word, 0, count); }
int64_t kv_band_claim_back(uint64_t *word, int64_t *count) { return claim(word, 1, count); }
