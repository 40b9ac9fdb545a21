// What the kernel harnesses share: a monotonic clock and memory allocated as the runtime allocates
// it. Header-only; the harnesses include it with the package's C kernels (see each harness's top).
#ifndef KV_HARNESS_H
#define KV_HARNESS_H

#include <stdlib.h>
#include <time.h>

// Seconds on the monotonic clock.
static inline double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// `count` floats on a cache line, as the runtime's buffers are (with malloc's 16 bytes, half the
// tiles' 32-byte activation loads would split a line), or NULL.
static inline float *lines(size_t count) {
    void *p = NULL;
    return posix_memalign(&p, 64, count * sizeof(float)) == 0 ? p : NULL;
}

#endif
