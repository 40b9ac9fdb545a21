import CKernels
import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Passes of more rows than the skinny kernel takes in one call, on packed weights, through the
/// skinny tiles a block of weight rows at a time (`Kernels.blockedSkinny`): every output gets the
/// bits one skinny call over all rows and all weights gives it, float32 and half, and `matmul`
/// takes that path exactly up to its row limit.
struct BlockedSkinnyTests {
    /// 150 activation rows (three chunks, the last partial) by 2,064 outputs of 256 (two whole
    /// blocks of 1,024 weight rows and a partial one): every loop of the blocked path and its ends.
    static let rows = 2 * Kernels.skinnyRowLimit + 22, outputs = 2_064, k = 256

    static func inputs(seed: UInt64) -> (a: Matrix, weights: Matrix) {
        let a = Matrix(rows: rows, cols: k, values: CKernelsTests.values(rows * k, seed: seed, scale: 1))
        let w = Matrix(rows: outputs, cols: k, values: CKernelsTests.values(outputs * k, seed: seed + 1, scale: 1)
            .map { Kernels.float(fromHalf: Kernels.halfBits($0)) })   // exact in half, so both precisions hold the same values
        return (a, w)
    }

    /// Blocked, with alpha and beta whose products round (so the order of every operation shows),
    /// against one `kv_skinny_gemm_packed` call over everything; on halfs also against the half
    /// kernel converting in registers.
    @Test(arguments: [WeightPrecision.f32, .f16])
    func blockedSkinny_givesEveryOutputTheBitsOfOneSkinnyCall(precision: WeightPrecision) {
        #expect(Self.outputs * Self.k * 4 > 2 * Kernels.blockedSkinnyWeightBytes, "the shape spans more than two blocks")
        let (a, values) = Self.inputs(seed: 41)
        let w = precision == .f16 ? Kernels.pack(WeightMatrix.half(copying: values)) : Kernels.pack(WeightMatrix(Matrix(rows: values.rows, cols: values.cols, values: values.toArray())))
        let floats = Kernels.pack(WeightMatrix(values))   // in place: `values` is not read again
        let start = CKernelsTests.values(Self.rows * Self.outputs, seed: 43, scale: 1)
        let c = Matrix(rows: Self.rows, cols: Self.outputs, values: start)
        Kernels.blockedSkinny(a, transposed: w, into: c, alpha: 0.3, beta: 0.7, block: HalfScratch(width: Self.k).block(0))

        guard case let .f32(packed) = floats.storage else { Issue.record("float32 weights expected"); return }
        let expected = Matrix(rows: Self.rows, cols: Self.outputs, values: start)
        kv_skinny_gemm_packed(a.base, a.rowStride, a.rows, packed.base, Self.outputs, Self.k, expected.base,
                              expected.rowStride, 0.3, 0.7)
        #expect(zip(c.toArray(), expected.toArray()).filter { $0.bitPattern != $1.bitPattern }.count == 0)
        #expect(zip(c.toArray(), start).filter { $0 == $1 }.count < Self.rows, "nothing written")
        if case let .f16(halfs) = w.storage {
            let inRegisters = Matrix(rows: Self.rows, cols: Self.outputs, values: start)
            kv_skinny_gemm_f16_packed(a.base, a.rowStride, a.rows, halfs.base, Self.outputs, Self.k, inRegisters.base,
                                      inRegisters.rowStride, 0.3, 0.7)
            #expect(zip(c.toArray(), inRegisters.toArray()).filter { $0.bitPattern != $1.bitPattern }.count == 0)
        }
    }

    /// `matmul` on packed weights takes the blocked path from one row past the skinny limit up to
    /// `blockedSkinnyRows` (its bits then), sgemm beyond; either way within 1e-5 of the float64 product.
    @Test(arguments: [WeightPrecision.f32, .f16])
    func matmul_takesTheBlockedPathUpToItsRowLimit(precision: WeightPrecision) {
        let limit = precision == .f16 ? Kernels.blockedSkinnyRows.f16 : Kernels.blockedSkinnyRows.f32
        let outputs = 96, k = 40
        let (a, values) = (Matrix(rows: limit + 1, cols: k, values: CKernelsTests.values((limit + 1) * k, seed: 45, scale: 1)),
                           Matrix(rows: outputs, cols: k, values: CKernelsTests.values(outputs * k, seed: 46, scale: 1)
                               .map { Kernels.float(fromHalf: Kernels.halfBits($0)) }))
        let w = Kernels.pack(precision == .f16 ? WeightMatrix.half(copying: values) : WeightMatrix(Matrix(rows: values.rows, cols: values.cols, values: values.toArray())))
        let scratch = HalfScratch(width: k)
        for rows in Set([Kernels.skinnyRowLimit + 1, limit, limit + 1]) {
            let x = a.rows(0 ..< rows)
            let blocked = rows > Kernels.skinnyRowLimit && rows <= limit
            #expect(Kernels.takesBlockedSkinny(rows: rows, w) == blocked, "\(rows) rows")
            let c = Matrix.zeros(rows: rows, cols: outputs), viaBlocks = Matrix.zeros(rows: rows, cols: outputs)
            Kernels.matmul(x, transposed: w, into: c, scratch: scratch)
            Kernels.blockedSkinny(x, transposed: w, into: viaBlocks, alpha: 1, beta: 0, block: scratch.block(0))
            if blocked {
                #expect(zip(c.toArray(), viaBlocks.toArray()).filter { $0.bitPattern != $1.bitPattern }.count == 0, "\(rows) rows")
            }
            var exact = [Float](repeating: 0, count: rows * outputs)
            for r in 0 ..< rows {
                for o in 0 ..< outputs {
                    exact[r * outputs + o] = Float((0 ..< k).reduce(0.0) { $0 + Double(x[r, $1]) * Double(values[o, $1]) })
                }
            }
            #expect(Fixtures.maxRelativeError(c.toArray(), exact) <= 1e-5, "\(rows) rows")
        }
    }
}
