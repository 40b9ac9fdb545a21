// Which AMD Zen core this is (kv_amd_zen_generation), and whether it is Intel's Emerald Rapids
// (kv_intel_emerald_rapids), for the kernel defaults that were measured per core: CPUID's vendor,
// family and model, and AVX-512 for the one AMD family that spans two cores.

#include "CKernels.h"
#include <string.h>

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <cpuid.h>

int kv_amd_zen_generation(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    char vendor[12];
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
    if (memcmp(vendor, "AuthenticAMD", 12) != 0 || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned base = (a >> 8) & 0xf, family = base == 0xf ? base + ((a >> 20) & 0xff) : base;
    unsigned model = ((a >> 4) & 0xf) | (base == 0xf ? ((a >> 16) & 0xf) << 4 : 0);
    __builtin_cpu_init();
    switch (family) {
    case 0x17: return model < 0x30 ? 1 : 2;                          // Zen and Zen+ below model 30h, then Zen 2
    case 0x19: return __builtin_cpu_supports("avx512f") ? 4 : 3;     // family 19h: Zen 3 has no AVX-512, Zen 4 does
    case 0x1a: return 5;
    default: return 0;
    }
}

int kv_intel_emerald_rapids(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    char vendor[12];
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
    if (memcmp(vendor, "GenuineIntel", 12) != 0 || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned family = (a >> 8) & 0xf, model = ((a >> 4) & 0xf) | ((a >> 16) & 0xf) << 4;
    return family == 6 && model == 0xcf;   // 5th generation Xeon Scalable; Sapphire Rapids (0x8f) unmeasured
}
#else
int kv_amd_zen_generation(void) { return 0; }
int kv_intel_emerald_rapids(void) { return 0; }
#endif
