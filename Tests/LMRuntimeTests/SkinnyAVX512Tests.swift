import CKernels
import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// The AVX-512 bodies (`kv_set_skinny_avx512`), forced on and off: the tiles for several activation
/// rows on packed weights give every element the AVX2 body's bits (its eight-lane sums in k order,
/// the same reduction and tail), for float32 and half weights and in the chunked half path; the
/// attention's weighted-rows products and softmax exponentials give theirs; and so does a model's
/// forward pass. They run only where the CPU has AVX-512 F and DQ, and say so elsewhere.
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
    /// balanced tiles of at most 12), decode (float32: tiles of two groups and a lone last group),
    /// 3 to 6 rows in tiles of two groups with and without a lone last group, a partial last group
    /// of weight rows (the next five shapes), k with and without a tail, and groups over 16 KB, whose
    /// tiles prefetch a fixed lead ahead (float32 group and pair tiles, and half group tiles: the
    /// last three shapes).
    static let shapes = [(1, 8, 16), (1, 20, 100), (1, 4, 9), (2, 4, 8), (3, 8, 77), (4, 12, 768), (5, 16, 13), (6, 8, 40), (7, 20, 100),
                         (10, 4, 24), (12, 8, 16), (13, 12, 77), (16, 8, 64), (23, 4, 35), (64, 8, 24), (2, 10, 9),
                         (9, 7, 33), (3, 10, 19), (6, 22, 40), (4, 29, 24), (5, 3, 8), (8, 12, 1100), (4, 20, 1100), (2, 12, 2101),
                         (1, 76, 24), (1, 67, 33), (1, 16, 40)]   // decode: two halves of pairs alternately, an odd last pair, a lone or partial group

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
    /// tiles on and off, for alpha/beta with and without accumulation; with more than twelve rows on
    /// float32, in tiles of one group and of two (`kv_set_skinny_pair_tiles`: 13, 14, 16, 20, 31 and
    /// 64 rows then make tiles of four to six over pairs, with a lone last group, a partial one, or
    /// neither, and 20 rows of 1,100 columns over groups beyond the lead cap).
    @Test(arguments: [false, true])
    func packedKernels_giveTheSameBitsWithAVX512OnOrOff(pairTiles: Bool) {
        let previous = kv_set_skinny_pair_tiles(pairTiles ? 1 : 0)
        defer { kv_set_skinny_pair_tiles(previous) }
        var mismatches: [String] = []
        for (rows, outputs, k) in Self.shapes + [(20, 20, 1100), (14, 9, 40), (31, 16, 24)] {
            let x = CKernelsTests.values(rows * k, seed: UInt64(rows * 7 + k), scale: 3)
            let w = CKernelsTests.values(outputs * k, seed: UInt64(outputs + 5 * k), scale: 2)
            let whole = outputs / kv_pack_group() * kv_pack_group()
            let floats = PackedWeightsTests.packed(Array(w[0 ..< whole * k]), rows: whole, k: k) + w[(whole * k)...]
            let halfs = PackedWeightsTests.packed(Array(w[0 ..< whole * k].map(Kernels.halfBits)), rows: whole, k: k)
                + w[(whole * k)...].map(Kernels.halfBits)
            let start = CKernelsTests.values(rows * outputs, seed: 11, scale: 1)
            let chunked = PackedWeightsTests.chunked(2 * kv_pack_group())
            for (alpha, beta) in [(Float(1), Float(0)), (0.5, 1), (0.3, 0.7)] {   // the last: finish's rounding shows
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

    /// The attention's `o += p·v` (also its score product, on a transposed key tile) with the
    /// AVX-512 blocks on and off, and the portable definition: the same bits for row counts around
    /// the block height, column counts around 16 and 64 (masked last vectors), and several key counts.
    @Test func weightedRowsAdd_givesTheSameBitsWithAVX512OnOrOff() {
        var mismatches: [String] = []
        for cols in [3, 8, 16, 20, 64, 70, 128, 131] {
            for (rows, n) in [(1, 1), (2, 5), (3, 130), (4, 17), (5, 64), (9, 33), (24, 128)] {
                let ldo = cols + 1, ldp = n + 3, ldv = cols + 7
                let p = CKernelsTests.values(rows * ldp, seed: UInt64(cols * 10 + rows), scale: 1), v = CKernelsTests.values(n * ldv, seed: UInt64(n + 7), scale: 1)
                let start = CKernelsTests.values(rows * ldo, seed: UInt64(cols + 999), scale: 1)
                let ways = Self.bothWays(rows: rows, outputs: ldo, k: n, start: start) { kv_weighted_rows_add($0, ldo, rows, p, ldp, v, ldv, n, cols) }
                var portable = start
                kv_weighted_rows_add_portable(&portable, ldo, rows, p, ldp, v, ldv, n, cols)
                if ways.on != ways.off || ways.on != portable.map(\.bitPattern) { mismatches.append("rows \(rows) n \(n) cols \(cols)") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    /// The softmax step's exponentials and their sum with the AVX-512 body on and off: the same
    /// bits for lengths around its steps of 32 and the eight-wide and scalar tails, and for inputs
    /// past the clamps at both ends.
    @Test func expSubSum_givesTheSameBitsWithAVX512OnOrOff() {
        for n in [1, 7, 8, 9, 31, 32, 33, 40, 64, 100, 128, 300] {
            var x = CKernelsTests.values(n, seed: UInt64(n), scale: 30)
            if n > 3 { x[1] = 500; x[2] = -500 }
            let shift = x.max()! - 2
            func run(_ on: Bool) -> (values: [UInt32], sum: UInt32) {
                var y = x
                let sum = Self.withAVX512(on) { kv_exp_sub_sum(&y, n, shift) }
                return (y.map(\.bitPattern), sum.bitPattern)
            }
            let on = run(true), off = run(false)
            #expect(on.values == off.values && on.sum == off.sum, "n \(n)")
        }
    }

    /// Few-query attention (1 to 32 new tokens, both the dot-product and the transposed score
    /// paths) and the blocked path (40 tokens) over 700 keys, with the AVX-512 bodies on and off:
    /// the same output bits, with the AVX-512 weighted values in 32-key chunks and from a dense copy.
    @Test(arguments: [false, true])
    func causalAttention_givesTheSameBitsWithAVX512OnOrOff(valueChunks: Bool) {
        let previous = kv_set_attention_value_chunks(valueChunks ? 1 : 0)
        defer { kv_set_attention_value_chunks(previous) }
        let shape = FewQueryAttentionTests.Shape(heads: 12, kvHeads: 4, headDim: 64)
        for t in [1, 3, 4, 8, 16, 32, 40] {
            let keyCount = 700
            let q = Matrix.zeros(rows: t, cols: shape.heads * shape.headDim)
            let k = Matrix.zeros(rows: keyCount, cols: shape.kvHeads * shape.headDim), v = Matrix.zeros(rows: keyCount, cols: k.cols)
            Kernels.fillUniform(q, seed: 31, scale: 2)
            Kernels.fillUniform(k, seed: 32, scale: 2)
            Kernels.fillUniform(v, seed: 33, scale: 1)
            func run(_ on: Bool) -> [UInt32] {
                Self.withAVX512(on) {
                    FewQueryAttentionTests.attention(shape, queries: q, keys: k, values: v, workers: 2).toArray().map(\.bitPattern)
                }
            }
            #expect(run(true) == run(false), "t=\(t), value chunks \(valueChunks)")
        }
    }

    /// The switch reports the previous choice, and turning it back restores it.
    @Test func setAttentionValueChunks_returnsThePreviousChoice() {
        let original = kv_set_attention_value_chunks(1)
        #expect(kv_set_attention_value_chunks(0) == 1)
        #expect(kv_set_attention_value_chunks(original) == 0)
    }

    /// The switch reports the previous choice, the getters follow it, and turning it back restores it.
    @Test func setSkinnyPairTiles_returnsThePreviousChoice() {
        let original = kv_set_skinny_pair_tiles(1)
        #expect(kv_set_skinny_pair_tiles(0) == 1)
        #expect(kv_set_skinny_pair_tiles(original) == 0)
    }

    @Test func setSkinnyAVX512_returnsThePreviousChoice() {
        let original = kv_set_skinny_avx512(1)
        #expect(kv_uses_skinny_avx512() == 1 && Kernels.skinnyKernels == "avx512")
        #expect(kv_set_skinny_avx512(0) == 1)
        #expect(kv_uses_skinny_avx512() == 0 && Kernels.skinnyKernels == (Kernels.usesAVX2 ? "avx2" : "portable"))
        #expect(kv_set_skinny_avx512(original) == 0)
    }

    /// Runs `body` with decode steps reading one stream a thread (`true`) or two, then restores the
    /// previous choice.
    static func withOneStreamDecode<T>(_ on: Bool, _ body: () throws -> T) rethrows -> T {
        let old = kv_set_decode_one_stream(on ? 1 : 0)
        defer { kv_set_decode_one_stream(old) }
        return try body()
    }

    /// Decode steps (one activation row) on packed float32 and half weights, plain and finite, give
    /// the AVX2 body's bits whether the AVX-512 body reads one group at a time (one stream) or two
    /// side by side: whole groups, odd pairs, a lone last group, partial last groups (13 and 3 rows),
    /// k with and without a tail, with and without accumulation.
    @Test func packedDecode_givesTheSameBitsInOneStreamOrTwo() {
        var mismatches: [String] = []
        for (outputs, k) in [(8, 16), (20, 100), (4, 9), (76, 24), (67, 33), (16, 40), (13, 2101), (3, 8), (12, 768)] {
            let x = CKernelsTests.values(k, seed: UInt64(k), scale: 3)
            let w = CKernelsTests.values(outputs * k, seed: UInt64(outputs + 3 * k), scale: 2)
            let whole = outputs / kv_pack_group() * kv_pack_group()
            let floats = PackedWeightsTests.packed(Array(w[0 ..< whole * k]), rows: whole, k: k) + w[(whole * k)...]
            let halfs = PackedWeightsTests.packed(Array(w[0 ..< whole * k].map(Kernels.halfBits)), rows: whole, k: k)
                + w[(whole * k)...].map(Kernels.halfBits)
            let start = CKernelsTests.values(outputs, seed: 5, scale: 1)
            for (alpha, beta) in [(Float(1), Float(0)), (0.5, 1), (0.3, 0.7)] {
                let kernels: [(String, (UnsafeMutablePointer<Float>) -> Void)] = [
                    ("f32", { kv_skinny_gemm_packed(x, k, 1, floats, outputs, k, $0, outputs, alpha, beta) }),
                    ("f16", { kv_skinny_gemm_f16_packed(x, k, 1, halfs, outputs, k, $0, outputs, alpha, beta) }),
                    ("f16 finite", { kv_skinny_gemm_f16_packed_finite(x, k, 1, halfs, outputs, k, $0, outputs, alpha, beta) }),
                ]
                for (name, kernel) in kernels {
                    let one = Self.withOneStreamDecode(true) { Self.bothWays(rows: 1, outputs: outputs, k: k, start: start, kernel) }
                    let two = Self.withOneStreamDecode(false) { Self.bothWays(rows: 1, outputs: outputs, k: k, start: start, kernel) }
                    if one.on != one.off || two.on != one.off { mismatches.append("\(name) \(outputs)x\(k) beta \(beta)") }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    /// The decode switch reports the previous choice, and Kernels.decodeStreams follows it while the
    /// AVX-512 bodies are on (two streams with them off).
    @Test func setDecodeOneStream_returnsThePreviousChoice() {
        Self.withAVX512(true) {
            let original = kv_set_decode_one_stream(1)
            #expect(kv_decodes_one_stream() == 1 && Kernels.decodeStreams == 1)
            #expect(kv_set_decode_one_stream(0) == 1)
            #expect(kv_decodes_one_stream() == 0 && Kernels.decodeStreams == 2)
            kv_set_decode_one_stream(1)
            Self.withAVX512(false) { #expect(Kernels.decodeStreams == 2) }
            #expect(kv_set_decode_one_stream(original) == 1)
        }
    }

    /// A tiny model's prompts of 1 to 64 new tokens on top of a cache (9, 2, 5, 16, 64, 3, 1 and 7):
    /// every logit and layer 1's cached keys, as bit patterns, under whatever kernel switches hold.
    static func forwardBits(precision: WeightPrecision, seed: UInt64) throws -> (logits: [[UInt32]], keys: [UInt32]) {
        let config = Fixtures.tinyConfig(vocabSize: 1000, contextLength: 200, dim: 32, sharedClassifier: false,
                                         weightPrecision: precision)
        let prompt = Fixtures.tokens(count: 150, vocabSize: 1000, seed: seed)
        let model = Transformer(weights: Fixtures.tinyWeights(config)), cache = model.makeCache()
        var logits: [[UInt32]] = [], at = 0
        for count in [9, 2, 5, 16, 64, 3, 1, 7] {
            logits.append(try model.forward(Array(prompt[at ..< at + count]), cache: cache).toArray().map(\.bitPattern))
            at += count
        }
        return (logits, cache.keys(layer: 1).rows(0 ..< at).toArray().map(\.bitPattern))
    }

    typealias ForwardBits = (logits: [[UInt32]], keys: [UInt32])

    /// ``forwardBits(precision:seed:)`` under two settings of the kernel switches (`first` and
    /// `second` each run the body they are given under theirs): the same logits and cached keys,
    /// bit for bit; a failure names `difference`.
    static func expectSameForwardBits(precision: WeightPrecision, seed: UInt64, _ difference: String,
                                      _ first: (() throws -> ForwardBits) throws -> ForwardBits,
                                      _ second: (() throws -> ForwardBits) throws -> ForwardBits,
                                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        let a = try first { try forwardBits(precision: precision, seed: seed) }
        let b = try second { try forwardBits(precision: precision, seed: seed) }
        #expect(a.logits == b.logits, "logits differ \(difference)", sourceLocation: sourceLocation)
        #expect(a.keys == b.keys, "cached keys differ \(difference)", sourceLocation: sourceLocation)
    }

    /// A model's prompts of 1 to 64 new tokens on top of a cache (float32 and half weights) give the same logits and cache rows bit for bit with the tiles on and off.
    @Test(arguments: [WeightPrecision.f32, .f16])
    func forward_givesTheSameLogitsAndCacheWithAVX512OnOrOff(precision: WeightPrecision) throws {
        try Self.expectSameForwardBits(precision: precision, seed: 21, "with the AVX-512 bodies on and off",
                                       { try Self.withAVX512(true, $0) }, { try Self.withAVX512(false, $0) })
    }

    /// The same prompts, AVX-512 bodies on, with decode steps reading one stream a thread and two:
    /// the same logits and cache rows bit for bit.
    @Test(arguments: [WeightPrecision.f32, .f16])
    func forward_givesTheSameLogitsAndCacheInOneDecodeStreamOrTwo(precision: WeightPrecision) throws {
        try Self.withAVX512(true) {
            try Self.expectSameForwardBits(precision: precision, seed: 25, "between one decode stream and two",
                                           { try Self.withOneStreamDecode(true, $0) }, { try Self.withOneStreamDecode(false, $0) })
        }
    }
}
