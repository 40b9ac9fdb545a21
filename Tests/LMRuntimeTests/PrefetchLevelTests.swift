import CKernels
import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// The kernels' software prefetches into L1 or into L2 only (`kv_set_prefetch_l2`): a hint that moves
/// no arithmetic, so every kernel path gives the same bits either way, and the switch reports and
/// restores its choice. Serialized: the tests switch the process-wide choice (results never depend on
/// it, so suites running meanwhile are unaffected).
@Suite(.serialized)
struct PrefetchLevelTests {
    /// Runs `body` with the prefetches into L2 (`true`) or L1, then restores the previous choice.
    static func withPrefetchToL2<T>(_ on: Bool, _ body: () throws -> T) rethrows -> T {
        let old = kv_set_prefetch_l2(on ? 1 : 0)
        defer { kv_set_prefetch_l2(old) }
        return try body()
    }

    /// The switch reports the previous choice, the getters follow it, and turning it back restores it.
    @Test func setPrefetchL2_returnsThePreviousChoice() {
        let original = kv_set_prefetch_l2(1)
        #expect(kv_prefetches_to_l2() == 1 && Kernels.prefetchLevel == "L2")
        #expect(kv_set_prefetch_l2(0) == 1)
        #expect(kv_prefetches_to_l2() == 0 && Kernels.prefetchLevel == "L1")
        #expect(kv_set_prefetch_l2(original) == 0)
        #expect(kv_prefetches_to_l2() == original)
    }

    /// Prompts of 1 to 64 new tokens on top of a cache (float32 and half weights; skinny tiles of every
    /// height, decode, the few-query attention, each prefetching weights and key rows ahead) give the
    /// same logits and cache rows bit for bit with the prefetches into L1 and into L2. (The AVX-512
    /// switch is left as it is: SkinnyAVX512Tests checks that switch's own state and may run meanwhile.)
    @Test(arguments: [WeightPrecision.f32, .f16])
    func forward_givesTheSameLogitsAndCacheWhereverPrefetchesLand(precision: WeightPrecision) throws {
        try SkinnyAVX512Tests.expectSameForwardBits(precision: precision, seed: 23, "between prefetches into L2 and L1",
                                                    { try Self.withPrefetchToL2(true, $0) }, { try Self.withPrefetchToL2(false, $0) })
    }
}
