import CKernels
import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// The AVX-512 tiles for several activation rows on packed weights (`kv_set_skinny_avx512`), forced
/// on and off: every element gets the AVX2 body's bits (its eight-lane sums in k order, the same
/// reduction and tail), for float32 and half weights, in the chunked half path, and through a
/// model's forward pass. They run only where the CPU has AVX-512 F and DQ, and say so elsewhere.
/// Serialized: the tests switch the process-wide choice (results never depend on it, so other
/// suites running meanwhile are unaffected).
@Suite(.serialized, .enabled(if: kv_has_avx512() != 0, "this CPU lacks AVX-512 F/DQ: the AVX-512 tiles never run here"))
struct SkinnyAVX512Tests {
    typealias PackedSkinny = PackedWeightsTests.PackedSkinny
    typealias PackedSkinnyHalf = PackedWeightsTests.PackedSkinnyHalf

    /// Runs `body` with the AVX-512 tiles on or off, then restores the previous choice.
    static func withAVX512<T>(_ on: Bool, _ body: () throws -> T) rethrows -> T {
        let old = kv_set_skinny_avx512(on ? 1 : 0)
        defer { kv_set_skinny_avx512(old) }
        return try body()
    }

    /// Activation rows that make every tile height from 2 to 12 (13, 16, 23 and 64 rows split into
    /// balanced tiles of at most 12), decode (float32: tiles of two groups and a lone last group), a partial last group of weight
    /// rows (the last two shapes), and k with and without a tail.
    static let shapes = [(1, 8, 16), (1, 20, 100), (1, 4, 9), (2, 4, 8), (3, 8, 77), (4, 12, 768), (5, 16, 13), (6, 8, 40), (7, 20, 100),
                         (10, 4, 24), (12, 8, 16), (13, 12, 77), (16, 8, 64), (23, 4, 35), (64, 8, 24), (2, 10, 9),
                         (9, 7, 33)]

    /// `kernel` on `rows` activation rows and `outputs` weight rows of `k`, onto `start`, with the
    /// AVX-512 tiles on and then off: the two results' bit patterns.
    static func bothWays(rows: Int, outputs: Int, k: Int, start: [Float],
                         _ kernel: (UnsafeMutablePointer<Float>) -> Void) -> (on: [UInt32], off: [UInt32]) {
        func run(_ on: Bool) -> [UInt32] {
            var y = start
            withAVX512(on) { y.withUnsafeMutableBufferPointer { kernel($0.baseAddress!) } }
            return y.map(\.bitPattern)
        }
        return (run(true), run(false))
    }

    /// Float32 and half packed kernels, and the chunked half entry point, give the same bits with the
    /// tiles on and off, for alpha/beta with and without accumulation.
    @Test func packedKernels_giveTheSameBitsWithAVX512OnOrOff() {
        var mismatches: [String] = []
        for (rows, outputs, k) in Self.shapes {
            let x = CKernelsTests.values(rows * k, seed: UInt64(rows * 7 + k), scale: 3)
            let w = CKernelsTests.values(outputs * k, seed: UInt64(outputs + 5 * k), scale: 2)
            let whole = outputs / kv_pack_group() * kv_pack_group()
            let floats = PackedWeightsTests.packed(Array(w[0 ..< whole * k]), rows: whole, k: k) + w[(whole * k)...]
            let halfs = PackedWeightsTests.packed(Array(w[0 ..< whole * k].map(Kernels.halfBits)), rows: whole, k: k)
                + w[(whole * k)...].map(Kernels.halfBits)
            let start = CKernelsTests.values(rows * outputs, seed: 11, scale: 1)
            let chunked = PackedWeightsTests.chunked(2 * kv_pack_group())
            for (alpha, beta) in [(Float(1), Float(0)), (0.5, 1)] {
                let label = "\(rows)x\(outputs)x\(k) beta \(beta)"
                let f32 = Self.bothWays(rows: rows, outputs: outputs, k: k, start: start) {
                    kv_skinny_gemm_packed(x, k, rows, floats, outputs, k, $0, outputs, alpha, beta)
                }
                if f32.on != f32.off { mismatches.append("f32 \(label)") }
                let f16 = Self.bothWays(rows: rows, outputs: outputs, k: k, start: start) {
                    kv_skinny_gemm_f16_packed(x, k, rows, halfs, outputs, k, $0, outputs, alpha, beta)
                }
                if f16.on != f16.off { mismatches.append("f16 \(label)") }
                guard outputs == whole else { continue }   // the chunked path takes whole groups
                let viaChunks = Self.bothWays(rows: rows, outputs: outputs, k: k, start: start) { y in
                    chunked(x, k, rows, halfs, outputs, k, y, outputs, alpha, beta)
                }
                if viaChunks.on != viaChunks.off { mismatches.append("chunked \(label)") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    /// The tiles are the definition's arithmetic, not only AVX2's: within float rounding of a
    /// double-precision dot product, element by element (a row or column mixed up would be far off).
    @Test func packedKernels_agreeWithTheDoublePrecisionDefinition() {
        let (rows, outputs, k) = (13, 12, 77)
        let x = CKernelsTests.values(rows * k, seed: 3, scale: 1), w = CKernelsTests.values(outputs * k, seed: 4, scale: 1)
        let packed = PackedWeightsTests.packed(w, rows: outputs, k: k)
        var y = [Float](repeating: .nan, count: rows * outputs)
        Self.withAVX512(true) { kv_skinny_gemm_packed(x, k, rows, packed, outputs, k, &y, outputs, 1, 0) }
        var worst = 0.0
        for t in 0 ..< rows {
            for n in 0 ..< outputs {
                let exact = (0 ..< k).reduce(0.0) { $0 + Double(x[t * k + $1]) * Double(w[n * k + $1]) }
                worst = max(worst, abs(Double(y[t * outputs + n]) - exact))
            }
        }
        #expect(worst <= 1e-5, "worst absolute error \(worst)")
    }

    /// The switch reports the previous choice, the getters follow it, and turning it back restores it.
    @Test func setSkinnyAVX512_returnsThePreviousChoice() {
        let original = kv_set_skinny_avx512(1)
        #expect(kv_uses_skinny_avx512() == 1 && Kernels.skinnyKernels == "avx512")
        #expect(kv_set_skinny_avx512(0) == 1)
        #expect(kv_uses_skinny_avx512() == 0 && Kernels.skinnyKernels == (Kernels.usesAVX2 ? "avx2" : "portable"))
        #expect(kv_set_skinny_avx512(original) == 0)
    }

    /// A model's prompts of 1 to 64 new tokens on top of a cache (float32 and half weights) give the same logits and cache rows bit for bit with the tiles on and off.
    @Test(arguments: [WeightPrecision.f32, .f16])
    func forward_givesTheSameLogitsAndCacheWithAVX512OnOrOff(precision: WeightPrecision) throws {
        let config = Fixtures.tinyConfig(vocabSize: 1000, contextLength: 200, dim: 32, sharedClassifier: false,
                                         weightPrecision: precision)
        let weights = Fixtures.tinyWeights(config)
        let prompt = Fixtures.tokens(count: 150, vocabSize: 1000, seed: 21)
        func run(_ on: Bool) throws -> (logits: [[UInt32]], keys: [Float]) {
            try Self.withAVX512(on) {
                let model = Transformer(weights: weights), cache = model.makeCache()
                var logits: [[UInt32]] = [], at = 0
                for count in [9, 2, 5, 16, 64, 3, 1, 7] {
                    logits.append(try model.forward(Array(prompt[at ..< at + count]), cache: cache).toArray().map(\.bitPattern))
                    at += count
                }
                return (logits, cache.keys(layer: 1).rows(0 ..< at).toArray())
            }
        }
        let on = try run(true), off = try run(false)
        #expect(on.logits == off.logits)
        #expect(on.keys.map(\.bitPattern) == off.keys.map(\.bitPattern))
    }
}
