import CKernels
import Foundation
import LMRuntime
import Testing

/// Which kernels OpenBLAS runs: never its generic SSE3 fallback on a CPU with AVX2 or AVX-512,
/// unless `OPENBLAS_CORETYPE` asks for it (`Scripts/test-blas-cores` does, to test each kernel set).
struct BLASCoreTests {
    static let forced = ProcessInfo.processInfo.environment["OPENBLAS_CORETYPE"]
    static let fitting = kv_blas_core_for_instructions().map { String(cString: $0) }

    @Test(.enabled(if: forced == nil, "OPENBLAS_CORETYPE chooses the kernels"),
          .enabled(if: fitting != nil, "no AVX2 CPU, or no DYNAMIC_ARCH OpenBLAS: nothing better to choose"))
    func blasCoreType_isNotTheGenericFallbackWhereTheCPURunsAVX2() {
        #expect(Kernels.blasCoreType != "Prescott")
        if let replaced = Kernels.blasCoreTypeReplaced {
            #expect(replaced == "Prescott")
            #expect(Kernels.blasCoreType == Self.fitting)
        }
        // The choice is made through the environment and must not stay there.
        #expect(getenv("OPENBLAS_CORETYPE") == nil)
    }

    @Test(.enabled(if: forced != nil, "runs under OPENBLAS_CORETYPE (Scripts/test-blas-cores)"))
    func blasCoreType_isTheOneForcedByTheEnvironment() {
        #expect(Kernels.blasCoreTypeReplaced == nil)
        let forced = Self.forced?.lowercased()
        #expect(Kernels.blasCoreType.lowercased() == forced || forced == "sapphirerapids",   // 0.3.21 runs Cooperlake for it
                "forced \(Self.forced ?? ""), running \(Kernels.blasCoreType)")
    }
}
