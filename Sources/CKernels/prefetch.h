// The software prefetches of the skinny and attention kernels (weights, key and value rows a tile
// or a group ahead of their loads), one switch for all: into L1 (PREFETCHT0) or into L2 only
// (PREFETCHT1). Include after <immintrin.h>, x86 only. The branch reads one global that is set before
// main runs (or by a test), so it is predicted; it changes no arithmetic.
#ifndef KV_PREFETCH_H
#define KV_PREFETCH_H

extern int kv_prefetch_l2_flag;

#define KV_PREFETCH(p)                                                                \
    do {                                                                              \
        if (__atomic_load_n(&kv_prefetch_l2_flag, __ATOMIC_RELAXED))                 \
            _mm_prefetch((const char *)(p), _MM_HINT_T1);                             \
        else                                                                          \
            _mm_prefetch((const char *)(p), _MM_HINT_T0);                             \
    } while (0)

#endif
