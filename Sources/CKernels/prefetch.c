// Where the kernels' software prefetches land (prefetch.h). A PREFETCHT0 holds one of the core's few
// L1 miss buffers until its line arrives from DRAM; a core that computes while it streams (the tiles
// of several activation rows) then has too few lines in flight to keep up. On a Zen 4 (AMD family 25
// model 17, 2-vCPU VM, 1 MiB L2) PREFETCHT1 fills L2 only, and one core's tile of eight activation
// rows over 400 MB of packed float32 weights went from 43 to 94 GFLOP/s (10.6 to 23.5 GB/s, where a
// plain read on that core gets 24); on two cores 4 / 8 / 16 rows took 13.7 / 13.1-14.4 / 19.1-19.9 ms
// against 16.0-17.1 / 19.2-20.5 / 23.5-25.6 with PREFETCHT0 (a harness of base's twelve layers). On a
// Zen 5 (2 MiB L2, more miss buffers) hints to L2 were no better than to L1 (a harness of the same
// shape, earlier). On an Intel Emerald Rapids (2-vCPU VM, 2 MiB L2) L2 was better by 5-10%: f32
// passes of 4 / 8 new tokens on base at 1.18-1.19 / 1.31-1.37 of their roofline in pairs against
// 1.25-1.29 / 1.43-1.46, f16 decode at 0.95-0.98 of the read ceiling against 0.84-0.86 (alternating
// runs). So the default is L2 on the Zen 4 family and Emerald Rapids; KVSESSION_PREFETCH_L2=0 or 1 chooses.

#include "CKernels.h"
#include <stdlib.h>
#include <string.h>

int kv_prefetch_l2_flag = 0;

int kv_prefetch_l2_by_default(void) { return kv_amd_zen_generation() == 4 || kv_intel_emerald_rapids(); }

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
__attribute__((constructor)) static void choose_prefetch_level(void) {
    const char *choice = getenv("KVSESSION_PREFETCH_L2");
    kv_prefetch_l2_flag = choice ? strcmp(choice, "0") != 0 : kv_prefetch_l2_by_default();
}
#endif

int kv_set_prefetch_l2(int on) { return __atomic_exchange_n(&kv_prefetch_l2_flag, on != 0, __ATOMIC_RELAXED); }

int kv_prefetches_to_l2(void) { return __atomic_load_n(&kv_prefetch_l2_flag, __ATOMIC_RELAXED); }
