// Which AMD Zen core this is (kv_amd_zen_generation), and whether it is Intel's Emerald Rapids
// (kv_intel_emerald_rapids), for the kernel defaults that were measured per core: CPUID's vendor,
// family and model, and AVX-512 for the one AMD family that spans two cores.

#include "CKernels.h"
#include <string.h>

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <cpuid.h>

// CPUID's display family and model when the vendor is `vendor`, else 0: the extended family counts
// from base family 15, the extended model from base families 6 and 15.
static int identity(const char *vendor, unsigned *family, unsigned *model) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    char name[12];
    memcpy(name, &b, 4), memcpy(name + 4, &d, 4), memcpy(name + 8, &c, 4);
    if (memcmp(name, vendor, 12) != 0 || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned base = (a >> 8) & 0xf;
    *family = base == 0xf ? base + ((a >> 20) & 0xff) : base;
    *model = ((a >> 4) & 0xf) | (base == 0xf || base == 6 ? ((a >> 16) & 0xf) << 4 : 0);
    return 1;
}

int kv_amd_zen_generation(void) {
    unsigned family, model;
    if (!identity("AuthenticAMD", &family, &model)) return 0;
    __builtin_cpu_init();
    switch (family) {
    case 0x17: return model < 0x30 ? 1 : 2;                          // Zen and Zen+ below model 30h, then Zen 2
    case 0x19: return __builtin_cpu_supports("avx512f") ? 4 : 3;     // family 19h: Zen 3 has no AVX-512, Zen 4 does
    case 0x1a: return 5;
    default: return 0;
    }
}

int kv_intel_emerald_rapids(void) {
    unsigned family, model;
    // 5th generation Xeon Scalable; Sapphire Rapids (0x8f) shares its core but was not measured.
    return identity("GenuineIntel", &family, &model) && family == 6 && model == 0xcf;
}
#else
int kv_amd_zen_generation(void) { return 0; }
int kv_intel_emerald_rapids(void) { return 0; }
#endif
