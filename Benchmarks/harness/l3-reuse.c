// A harness for what the last-level cache keeps of a stream, on one core: whether bytes brought in
// ahead of their use (the "warm the next weights during attention" idea) are still near when read,
// and how large a buffer read again and again ends up served from the L3.
//
//   warm:     for each way of touching a fresh buffer of `megabytes` first, then `between` MB of
//             other reads (a buffer read every time), the GB/s of one read of it. Ways: 0 none (cold),
//             1 PREFETCHT1 of every line, 2 PREFETCHT1 with a load of each line 64 lines later (so
//             the line has been used, as a kernel's own loads would use it), 3 one plain read,
//             4 two plain reads. Each trial starts after a 1 GiB streaming read.
//   resident: GB/s of each of `passes` reads of one buffer, for each size given.
//
// Not part of any target; build it from the repository's root:
//
//   clang -O2 Benchmarks/harness/l3-reuse.c -o .build/l3-reuse
//   taskset -c 0 .build/l3-reuse warm [megabytes] [between] [rounds]
//   taskset -c 0 .build/l3-reuse resident [passes] megabytes...

#include "harness.h"
#include <immintrin.h>
#include <stdio.h>
#include <string.h>

enum { WAYS = 5, FLUSH_MB = 1024 };

// Sums every float of p[0 ..< n] (n a multiple of 64), four independent chains.
__attribute__((target("avx512f"))) static float readAll(const float *p, size_t n) {
    __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
    for (size_t i = 0; i < n; i += 64) {
        a = _mm512_add_ps(a, _mm512_load_ps(p + i));
        b = _mm512_add_ps(b, _mm512_load_ps(p + i + 16));
        c = _mm512_add_ps(c, _mm512_load_ps(p + i + 32));
        d = _mm512_add_ps(d, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
}

// Touches p[0 ..< n] the way `way` names (see the top).
__attribute__((target("avx512f"))) static float touch(const float *p, size_t n, int way) {
    if (way == 3) return readAll(p, n);
    if (way == 4) return readAll(p, n) + readAll(p, n);
    const size_t lag = 64 * 16;   // 64 lines, in floats
    __m512 used = _mm512_setzero_ps();
    for (size_t i = 0; way > 0 && i < n + lag; i += 16) {
        if (i < n) _mm_prefetch((const char *)(p + i), _MM_HINT_T1);
        if (way == 2 && i >= lag) used = _mm512_add_ps(used, _mm512_load_ps(p + i - lag));
    }
    return _mm512_reduce_add_ps(used);
}

static float *filled(size_t megabytes) {
    float *p = lines(megabytes << 18);
    if (p) memset(p, 0, megabytes << 20);
    return p;
}

static volatile float sink;

static int warm(size_t megabytes, size_t between, int rounds) {
    size_t n = megabytes << 18, trials = (size_t)rounds * WAYS;
    float *pool = filled(megabytes * trials), *flush = filled(FLUSH_MB), *other = filled(between ? between : 1);
    if (!pool || !flush || !other) return 1;
    for (int round = 0; round < rounds; round++) {
        printf("round %d, %zu MB, %zu MB between:", round, megabytes, between);
        for (int way = 0; way < WAYS; way++) {
            const float *w = pool + (size_t)(round * WAYS + way) * n;   // never read before
            sink += readAll(flush, (size_t)FLUSH_MB << 18);
            sink += touch(w, n, way);
            if (between) sink += readAll(other, between << 18);
            double t = seconds();
            sink += readAll(w, n);
            printf("  way %d %.1f", way, (double)(n * 4) / (seconds() - t) / 1e9);
        }
        printf(" GB/s\n");
    }
    return 0;
}

static int resident(int passes, int count, char **sizes) {
    for (int s = 0; s < count; s++) {
        size_t megabytes = (size_t)atoi(sizes[s]), n = megabytes << 18;
        float *w = filled(megabytes);
        if (!w) return 1;
        printf("%5zu MB:", megabytes);
        for (int pass = 0; pass < passes; pass++) {
            double t = seconds();
            sink += readAll(w, n);
            printf(" %.1f", (double)(n * 4) / (seconds() - t) / 1e9);
        }
        printf(" GB/s\n");
        free(w);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "warm") == 0)
        return warm(argc > 2 ? (size_t)atoi(argv[2]) : 12, argc > 3 ? (size_t)atoi(argv[3]) : 8, argc > 4 ? atoi(argv[4]) : 3);
    if (argc > 3 && strcmp(argv[1], "resident") == 0) return resident(atoi(argv[2]), argc - 3, argv + 3);
    fprintf(stderr, "usage: l3-reuse warm [megabytes] [between] [rounds] | resident passes megabytes...\n");
    return 2;
}
