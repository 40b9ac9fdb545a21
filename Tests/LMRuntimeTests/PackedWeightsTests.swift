import CKernels
import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Projection weights packed for streaming (`Kernels.pack`): groups of `kv_pack_group()` rows
/// interleaved by eight-element chunks. The packing is a permutation within each group, the
/// packed kernels give the plain kernels' results bit for bit (same arithmetic per element), and a
/// model loaded packed gives the logits and caches of the same weights on plain rows.
struct PackedWeightsTests {
    typealias Skinny = HalfPrecisionTests.Skinny
    typealias SkinnyHalf = HalfPrecisionTests.SkinnyHalf
    /// A packed entry point: no `ldw` (a packed matrix is dense, ldw == k).
    typealias PackedSkinny = @Sendable (UnsafePointer<Float>, Int, Int, UnsafePointer<Float>, Int, Int, UnsafeMutablePointer<Float>, Int, Float, Float) -> Void
    typealias PackedSkinnyHalf = @Sendable (UnsafePointer<Float>, Int, Int, UnsafePointer<UInt16>, Int, Int, UnsafeMutablePointer<Float>, Int, Float, Float) -> Void

    static let group = kv_pack_group()
    /// Activation rows, output rows (whole groups) and inner sizes that reach every tile, tail and
    /// prefetch branch: one row (decode), twos and threes, four and more (the half kernel's 2x4
    /// tiles), the limit of 32; k with and without a tail of fewer than eight elements.
    static let shapes = [(1, 4, 8), (1, 8, 77), (1, 24, 100), (2, 12, 9), (3, 8, 64), (4, 20, 72), (5, 16, 13),
                         (7, 36, 200), (8, 8, 24), (13, 12, 77), (32, 16, 40)]

    /// `values` (`rows` rows of `k`) packed by `kv_pack8_f32`.
    static func packed(_ values: [Float], rows: Int, k: Int) -> [Float] {
        var out = values, scratch = [Float](repeating: 0, count: group * k)
        kv_pack8_f32(&out, rows, k, &scratch)
        return out
    }

    static func packed(_ values: [UInt16], rows: Int, k: Int) -> [UInt16] {
        var out = values, scratch = [UInt16](repeating: 0, count: group * k)
        kv_pack8_f16(&out, rows, k, &scratch)
        return out
    }

    /// Packing moves every element to `kv_packed_index`, a permutation of each group's own
    /// elements; unpacking any rows gives them back.
    @Test func pack_isAPermutationWithinGroupsThatUnpacks() {
        for (rows, k) in [(4, 8), (8, 13), (12, 77), (20, 3)] {
            let plain = (0 ..< rows * k).map(Float.init)
            let p = Self.packed(plain, rows: rows, k: k)
            var seen = Set<Int>()
            for n in 0 ..< rows {
                for i in 0 ..< k {
                    let at = kv_packed_index(n, i, k)
                    #expect(p[at] == plain[n * k + i], "(\(n), \(i)) of \(rows)x\(k)")
                    #expect(at / (Self.group * k) == n / Self.group, "(\(n), \(i)) left its group")
                    seen.insert(at)
                }
            }
            #expect(seen.count == rows * k)
            for range in [0 ..< rows, 1 ..< rows - 1, rows - 1 ..< rows] {
                var out = [Float](repeating: -1, count: range.count * (k + 2))
                kv_unpack8_f32(&out, k + 2, p, range.lowerBound, range.count, k)
                for (r, n) in range.enumerated() {
                    #expect(Array(out[r * (k + 2) ..< r * (k + 2) + k]) == Array(plain[n * k ..< (n + 1) * k]), "row \(n)")
                }
            }
        }
    }

    /// The packed float kernels are the plain ones bit for bit, body for body.
    @Test(arguments: [("dispatched", kv_skinny_gemm_packed as PackedSkinny, kv_skinny_gemm as Skinny),
                      ("portable", kv_skinny_gemm_packed_portable as PackedSkinny, kv_skinny_gemm_portable as Skinny)])
    func skinnyGEMMPacked_isThePlainKernelBitForBit(name: String, packed: PackedSkinny, plain: Skinny) {
        for (rows, outputs, k) in Self.shapes {
            let x = CKernelsTests.values(rows * k, seed: UInt64(rows + k), scale: 1)
            let w = CKernelsTests.values(outputs * k, seed: UInt64(3 * outputs + k), scale: 2)
            let p = Self.packed(w, rows: outputs, k: k)
            let start = CKernelsTests.values(rows * outputs, seed: 5, scale: 1)
            for (alpha, beta) in [(Float(1), Float(0)), (0.5, 1)] {
                var a = start, b = start
                packed(x, k, rows, p, outputs, k, &a, outputs, alpha, beta)
                plain(x, k, rows, w, k, outputs, k, &b, outputs, alpha, beta)
                #expect(zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern }, "\(name) \(rows)x\(outputs)x\(k)")
            }
        }
    }

    /// The same for half weights, and for the chunked entry point (a few groups converted at a time).
    @Test(arguments: [("dispatched", kv_skinny_gemm_f16_packed as PackedSkinnyHalf, kv_skinny_gemm_f16 as SkinnyHalf),
                      ("portable", kv_skinny_gemm_f16_packed_portable as PackedSkinnyHalf, kv_skinny_gemm_f16_portable as SkinnyHalf),
                      ("chunked", chunked(2 * kv_pack_group()), HalfPrecisionTests.chunked(2 * kv_pack_group()))])
    func skinnyGEMMHalfPacked_isThePlainKernelBitForBit(name: String, packed: PackedSkinnyHalf, plain: SkinnyHalf) {
        for (rows, outputs, k) in Self.shapes {
            let x = CKernelsTests.values(rows * k, seed: UInt64(rows + k), scale: 1)
            let w = CKernelsTests.values(outputs * k, seed: UInt64(3 * outputs + k), scale: 2).map(Kernels.halfBits)
            let p = Self.packed(w, rows: outputs, k: k)
            var a = [Float](repeating: 0, count: rows * outputs), b = a
            packed(x, k, rows, p, outputs, k, &a, outputs, 1, 0)
            plain(x, k, rows, w, k, outputs, k, &b, outputs, 1, 0)
            #expect(zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern }, "\(name) \(rows)x\(outputs)x\(k)")
        }
    }

    /// ``kv_skinny_gemm_f16_chunked`` on packed weights, `chunkRows` rows per chunk.
    static func chunked(_ chunkRows: Int) -> PackedSkinnyHalf {
        { x, ldx, rows, w, outputs, k, y, ldy, alpha, beta in
            var scratch = [Float](repeating: .nan, count: chunkRows * (k + 3))
            kv_skinny_gemm_f16_chunked(x, ldx, rows, w, k, outputs, k, y, ldy, alpha, beta, &scratch, k + 3, chunkRows, 1, nil, 0)
        }
    }

    /// Loaders pack every projection whose views allow it; reading a packed matrix (subscript,
    /// arrays, plain float copies) gives the plain values, and the fingerprint is the plain one's.
    @Test(arguments: [WeightPrecision.f32, .f16])
    func loading_packsProjectionsAndReadsTheirValues(precision: WeightPrecision) throws {
        let config = Fixtures.tinyConfig(vocabSize: 1000, dim: 32, sharedClassifier: false, weightPrecision: precision)
        let packed = Fixtures.tinyWeights(config), plain = try packed.unpackedCopy()
        #expect(packed.hasPackedWeights == ModelWeights.packsWeights && !plain.hasPackedWeights)
        let l = packed.layers[1], p = plain.layers[1]
        #expect(!packed.tokenEmbedding.packed)
        for (a, b) in [(l.qkv, p.qkv), (l.wo, p.wo), (l.gateUp, p.gateUp), (l.down, p.down), (packed.classifier, plain.classifier)] {
            #expect(a.packed == ModelWeights.packsWeights)
            #expect(a.toArray() == b.toArray())
            #expect(a.floatMatrix().toArray() == b.toArray())
            #expect(a[a.rows - 1, a.cols - 1] == b[b.rows - 1, b.cols - 1] && a[5, 3] == b[5, 3])
        }
        #expect(l.wk.toArray() == p.wk.toArray() && l.wv.toArray() == p.wv.toArray())
        // The fingerprint names the weights, not their layout: caches saved by either still match.
        #expect(ModelFingerprint(packed) == ModelFingerprint(plain))
    }

    /// A dimension that splits a group keeps that matrix plain: one 10-wide K/V head gives K and V
    /// 10 rows each, so Q|K|V stays plain while the others pack.
    @Test func loading_keepsPlainWhatAViewWouldSplit() {
        let config = ModelConfig(name: "odd", dim: 40, hiddenDim: 120, layerCount: 1, headCount: 4, kvHeadCount: 1,
                                 vocabSize: 200, contextLength: 64, sharedClassifier: false, weights: .synthetic(seed: 3))
        let weights = try! ModelWeights.synthetic(config, seed: 3)
        #expect(!weights.layers[0].qkv.packed)
        #expect(weights.layers[0].down.packed == ModelWeights.packsWeights)
    }

    /// A packed model gives the plain model's logits bit for bit on every pass the skinny kernels
    /// run (decode and up to 32 new tokens, on a cache), and within rounding on longer prefills
    /// (plain blocks of unpacked rows go to sgemm, whose last bits depend on the call's shape);
    /// converting a packed model keeps it packed and gives the converted plain model's logits.
    @Test(arguments: [WeightPrecision.f32, .f16])
    func forward_packedGivesThePlainLogits(precision: WeightPrecision) throws {
        let config = Fixtures.tinyConfig(vocabSize: 1000, contextLength: 200, dim: 32, sharedClassifier: false,
                                         weightPrecision: precision)
        let weights = Fixtures.tinyWeights(config)
        let packed = Transformer(weights: weights), plain = Transformer(weights: try weights.unpackedCopy())
        let prompt = Fixtures.tokens(count: 70, vocabSize: 1000, seed: 9)
        let a = packed.makeCache(), b = plain.makeCache()
        func logits(_ tokens: [Int]) throws -> ([Float], [Float]) {
            (try packed.forward(tokens, cache: a).toArray(), try plain.forward(tokens, cache: b).toArray())
        }
        let (longA, longB) = try logits(Array(prompt[0 ..< 40]))   // sgemm on plain blocks
        #expect(Fixtures.maxRelativeError(longA, longB) <= 1e-4)
        #expect(Fixtures.maxRelativeError(a.keys(layer: 1).rows(0 ..< 40).toArray(), b.keys(layer: 1).rows(0 ..< 40).toArray()) <= 1e-4)
        a.truncate(to: 0)
        b.truncate(to: 0)
        for piece in [prompt[0 ..< 20], prompt[20 ..< 52], prompt[52 ..< 53], prompt[53 ..< 57]] {
            let (x, y) = try logits(Array(piece))
            #expect(zip(x, y).allSatisfy { $0.bitPattern == $1.bitPattern }, "\(piece.count) tokens at \(piece.startIndex)")
        }
        #expect(a.keys(layer: 1).rows(0 ..< 57).toArray() == b.keys(layer: 1).rows(0 ..< 57).toArray())
        #expect(a.values(layer: 0).rows(0 ..< 57).toArray() == b.values(layer: 0).rows(0 ..< 57).toArray())
        let other: WeightPrecision = precision == .f32 ? .f16 : .f32
        let converted = try weights.converted(to: other), convertedPlain = try weights.unpackedCopy().converted(to: other)
        #expect(converted.layers[0].gateUp.packed == ModelWeights.packsWeights && !convertedPlain.layers[0].gateUp.packed)
        #expect(converted.layers[0].gateUp.toArray() == convertedPlain.layers[0].gateUp.toArray())
        let c = Transformer(weights: converted), d = Transformer(weights: convertedPlain)
        let x = try c.forward(Array(prompt[0 ..< 9]), cache: c.makeCache()).toArray()
        let y = try d.forward(Array(prompt[0 ..< 9]), cache: d.makeCache()).toArray()
        #expect(zip(x, y).allSatisfy { $0.bitPattern == $1.bitPattern })
    }
}
