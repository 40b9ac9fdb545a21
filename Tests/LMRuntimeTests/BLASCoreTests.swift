import CKernels
import COpenBLAS
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

    /// The replacement swaps OpenBLAS's kernel table while none of OpenBLAS's workers runs: a
    /// worker starting up beside it initialises the table too, and the two interleaved crashed about
    /// one process in a thousand at load (`Benchmarks/harness/blas-core-load.c` repeats a load).
    @Test(.enabled(if: kv_blas_replaced_core() != nil, "nothing was replaced on this CPU and OpenBLAS"))
    func blasCoreReplacement_ranWithOpenBLASWorkersStopped() throws {
        let ran = kv_blas_workers_ran_at_replacement()
        try #require(ran != -1, "this OpenBLAS does not export blas_server_avail")
        #expect(ran == 0)
        // Stopped is not gone: OpenBLAS on two threads starts them again and gets the definition.
        let n = 96
        let a = (0..<n * n).map { Float($0 % 7) - 3 }, b = (0..<n * n).map { Float($0 % 5) - 2 }
        var c = [Float](repeating: .nan, count: n * n)
        Kernels.withOpenBLASThreads(2) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(n), Int32(n), Int32(n),
                        1, a, Int32(n), b, Int32(n), 0, &c, Int32(n))
        }
        for (i, j) in [(0, 0), (n / 2, 7), (n - 1, n - 1)] {
            let sum = (0..<n).reduce(Float(0)) { $0 + a[i * n + $1] * b[$1 * n + j] }   // small integers: exact
            #expect(c[i * n + j] == sum, "row \(i), column \(j)")
        }
    }

    @Test(.enabled(if: forced != nil, "runs under OPENBLAS_CORETYPE (Scripts/test-blas-cores)"))
    func blasCoreType_isTheOneForcedByTheEnvironment() {
        #expect(Kernels.blasCoreTypeReplaced == nil)
        let forced = Self.forced?.lowercased()
        #expect(Kernels.blasCoreType.lowercased() == forced || forced == "sapphirerapids",   // 0.3.21 runs Cooperlake for it
                "forced \(Self.forced ?? ""), running \(Kernels.blasCoreType)")
    }
}
