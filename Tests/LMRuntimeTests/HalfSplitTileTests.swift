import CKernels
import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// The decode tile that converts half of its rows with integer operations
/// (`kv_skinny_gemm_f16_packed_finite`), forced on and off whatever the CPU: F16C's bits for every
/// finite half, for activations up to its 2^16 bound and past it (where it must step aside), and
/// the flag (`WeightMatrix.finiteHalfs`) that admits only matrices holding no infinity or NaN.
/// Serialized: the tests switch the process-wide choice (results never depend on it, so other
/// suites running meanwhile are unaffected).
@Suite(.serialized) struct HalfSplitTileTests {
    typealias PackedSkinnyHalf = PackedWeightsTests.PackedSkinnyHalf

    /// Runs `body` with the split tile on or off, then restores the previous choice.
    static func withSplitTile<T>(_ on: Bool, _ body: () throws -> T) rethrows -> T {
        let old = kv_set_half_split_tile(on ? 1 : 0)
        defer { kv_set_half_split_tile(old) }
        return try body()
    }

    /// `rows` activation rows of `x` times packed `w` (`outputs` rows of `k`) through `kernel`,
    /// onto `start` with `alpha` and `beta`.
    static func product(_ kernel: PackedSkinnyHalf, x: [Float], rows: Int, packed w: [UInt16], outputs: Int, k: Int,
                        start: [Float], alpha: Float = 1, beta: Float = 0) -> [Float] {
        var y = start
        kernel(x, k, rows, w, outputs, k, &y, outputs, alpha, beta)
        return y
    }

    /// Each of the 63,488 finite halfs alone in its dot product (a one-hot activation row) comes
    /// out as Swift's `Float16` converts it: the integer conversion is exact over the whole range,
    /// subnormals and both zeros included.
    @Test func splitTile_convertsEveryFiniteHalfExactly() {
        let finite = (0 ... 0xFFFF).map(UInt16.init).filter { $0 & 0x7C00 != 0x7C00 }
        let k = 16, outputs = 512, perMatrix = outputs * k
        var wrong = 0
        for first in stride(from: 0, to: finite.count, by: perMatrix) {
            let w = Array(finite[first ..< min(finite.count, first + perMatrix)])
                + [UInt16](repeating: 0, count: max(0, first + perMatrix - finite.count))
            let packed = PackedWeightsTests.packed(w, rows: outputs, k: k)
            for j in 0 ..< k {
                var x = [Float](repeating: 0, count: k)
                x[j] = 1
                let y = Self.withSplitTile(true) {
                    Self.product(kv_skinny_gemm_f16_packed_finite, x: x, rows: 1, packed: packed, outputs: outputs, k: k,
                                 start: [Float](repeating: .nan, count: outputs))
                }
                for n in 0 ..< outputs where y[n] != Float(Float16(bitPattern: w[n * k + j])) { wrong += 1 }
            }
        }
        #expect(wrong == 0, "\(wrong) halfs came out wrong")
    }

    /// On weights with the half range's extremes (subnormals, ±0, ±65504, the smallest normal)
    /// among random ones, and activation rows that stay below 2^16 or do not (2^16 itself, 10^30,
    /// infinity, NaN: the tile must leave those to F16C), the finite entry point gives the plain F16C
    /// kernel's bits with the split tile on and off, for one activation row (the tile, its edge of
    /// four rows, k with and without a tail) and for several (which never take it).
    @Test(arguments: [true, false])
    func packedFinite_isThePlainKernelBitForBit(split: Bool) {
        let specials: [UInt16] = [0x0001, 0x83FF, 0x0400, 0x8000, 0x0000, 0x7BFF, 0xFBFF, 0x3C00]
        let large: [Float?] = [nil, 65535.996, .leastNonzeroMagnitude, -65536, 1e30, .infinity, .nan]
        var mismatches: [String] = []
        for (rows, outputs, k) in [(1, 8, 8), (1, 16, 77), (1, 12, 100), (1, 36, 768), (1, 8, 13), (2, 16, 24), (5, 8, 40)] {
            var w = CKernelsTests.values(outputs * k, seed: UInt64(outputs + k), scale: 2).map(Kernels.halfBits)
            for (i, special) in specials.enumerated() { w[(i * 37) % w.count] = special }
            let packed = PackedWeightsTests.packed(w, rows: outputs, k: k)
            let start = CKernelsTests.values(rows * outputs, seed: 9, scale: 1)
            for value in large {
                var x = CKernelsTests.values(rows * k, seed: UInt64(rows * k), scale: 3)
                if let value { x[k / 2] = value }
                for (alpha, beta) in [(Float(1), Float(0)), (0.5, 1)] {
                    let a = Self.withSplitTile(split) {
                        Self.product(kv_skinny_gemm_f16_packed_finite, x: x, rows: rows, packed: packed, outputs: outputs, k: k,
                                     start: start, alpha: alpha, beta: beta)
                    }
                    var b = start
                    kv_skinny_gemm_f16(x, k, rows, w, k, outputs, k, &b, outputs, alpha, beta)
                    if !zip(a, b).allSatisfy({ $0.bitPattern == $1.bitPattern }) {
                        mismatches.append("\(rows)x\(outputs)x\(k), x[\(k / 2)] = \(value.map { "\($0)" } ?? "random"), beta \(beta)")
                    }
                }
            }
        }
        #expect(mismatches.isEmpty, "split \(split): \(mismatches)")
    }

    /// `checkingFiniteHalfs` flags a half matrix with no infinity or NaN, leaves one with a value
    /// rounded past 65504 or a NaN unflagged, and never flags float32 storage; packing checks. An
    /// unflagged packed matrix decodes as the plain kernel does (its infinity comes through) with the
    /// split tile on; row views keep the flag.
    @Test func checkingFiniteHalfs_flagsOnlyMatricesWithoutInfinityOrNaN() {
        let k = 16, outputs = 8
        let x = Matrix.zeros(rows: 1, cols: k)
        Kernels.fillUniform(x, seed: 3, scale: 1)
        for poison in [nil, Float(1e6), .nan, -.infinity] {
            let values = Matrix.zeros(rows: outputs, cols: k)
            Kernels.fillUniform(values, seed: 4, scale: 1)
            if let poison { values[3, 5] = poison }
            let plain = WeightMatrix.half(copying: values)
            #expect(!plain.finiteHalfs, "unchecked")
            #expect(plain.checkingFiniteHalfs().finiteHalfs == (poison == nil), "poison \(String(describing: poison))")
            let packed = Kernels.pack(WeightMatrix.half(copying: values))
            #expect(packed.packed && packed.finiteHalfs == (poison == nil))
            #expect(packed.rows(4 ..< 8).finiteHalfs == packed.finiteHalfs)
            let a = Matrix.zeros(rows: 1, cols: outputs), b = Matrix.zeros(rows: 1, cols: outputs)
            Self.withSplitTile(true) { Kernels.matmul(x, transposed: packed, into: a) }
            Kernels.matmul(x, transposed: plain, into: b)
            #expect(a.toArray().map(\.bitPattern) == b.toArray().map(\.bitPattern), "poison \(String(describing: poison))")
        }
        #expect(!WeightMatrix(Matrix.zeros(rows: 4, cols: 8)).checkingFiniteHalfs().finiteHalfs)
    }

    /// Converting float32 weights to f16 checks every projection once its halfs are final: an
    /// infinity already in the weights (which converts to itself; a finite weight past the half
    /// range is refused instead) leaves its matrix unflagged and the rest flagged.
    @Test func converted_flagsEachProjectionThatStayedFinite() throws {
        let f32 = try Fixtures.tinyWeights(HalfPrecisionTests.f32Config).unpackedCopy()
        f32.layers[1].down.floats[2, 3] = .infinity
        let f16 = try f32.converted(to: .f16)
        #expect(!f16.layers[1].down.finiteHalfs)
        #expect(f16.layers[0].down.finiteHalfs && f16.layers[1].gateUp.finiteHalfs && f16.layers[1].qkv.finiteHalfs)
        #expect(f16.classifier.finiteHalfs && f16.layers[1].wo.finiteHalfs)
    }

    /// A loaded f16 model's decode steps give the same logits bit for bit with the split tile on
    /// and off (its packed projections are flagged, so the tile runs when on).
    @Test func decode_givesTheSameLogitsWithTheSplitTileOnOrOff() throws {
        let weights = Fixtures.tinyWeights(HalfPrecisionTests.f16Config)
        #expect(weights.layers[0].gateUp.finiteHalfs == weights.layers[0].gateUp.packed)
        let prompt = Fixtures.tokens(count: 9, vocabSize: weights.config.vocabSize, seed: 2)
        func logits(split: Bool) throws -> [[UInt32]] {
            try Self.withSplitTile(split) {
                let model = Transformer(weights: weights, maxBatch: 16), cache = model.makeCache()
                var out = [try model.forward(prompt, cache: cache).toArray().map(\.bitPattern)]
                for token in [5, 77, 300, 12] { out.append(try model.forward([token], cache: cache).toArray().map(\.bitPattern)) }
                return out
            }
        }
        #expect(try logits(split: true) == logits(split: false))
    }
}
