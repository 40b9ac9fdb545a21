import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Causal grouped-query attention against its definition, across key tiles (the online
/// softmax) and however the queries are batched.
struct AttentionTests {
    static let heads = 4, kvHeads = 2, headDim = 8

    static func random(_ rows: Int, _ cols: Int, seed: UInt64, scale: Float) -> Matrix {
        let m = Matrix.zeros(rows: rows, cols: cols)
        Kernels.fillUniform(m, seed: seed, scale: scale)
        return m
    }

    /// Keys whose scores rise along the sequence, so later tiles raise a row's maximum (the
    /// rescaling path), plus noise.
    static func inputs(keys n: Int) -> (queries: Matrix, keys: Matrix, values: Matrix) {
        let q = random(n, heads * headDim, seed: 1, scale: 2), k = random(n, kvHeads * headDim, seed: 2, scale: 2)
        for r in 0 ..< n { for c in 0 ..< k.cols { k[r, c] += Float(r) / Float(n) * 3 * (q[r, 0] > 0 ? 1 : -1) } }
        return (q, k, random(n, kvHeads * headDim, seed: 3, scale: 1))
    }

    static func attention(_ x: (queries: Matrix, keys: Matrix, values: Matrix), positions: Range<Int>, workers: Int = 2) -> Matrix {
        let out = Matrix.zeros(rows: positions.count, cols: heads * headDim)
        let scratch = AttentionScratch(headCount: heads, kvHeadCount: kvHeads, headDim: headDim, contextLength: x.keys.rows, workers: workers)
        Kernels.causalAttention(queries: x.queries.rows(positions), keys: x.keys.rows(0 ..< positions.upperBound),
                                values: x.values.rows(0 ..< positions.upperBound), output: out, scratch: scratch,
                                headCount: heads, kvHeadCount: kvHeads)
        return out
    }

    /// Softmax attention of one query row in double precision.
    static func definition(_ x: (queries: Matrix, keys: Matrix, values: Matrix), position: Int, head: Int) -> [Double] {
        let kv = head / (heads / kvHeads)
        let scores = (0 ... position).map { key in
            (0 ..< headDim).map { Double(x.queries[position, head * headDim + $0]) * Double(x.keys[key, kv * headDim + $0]) }
                .reduce(0, +) / Double(headDim).squareRoot()
        }
        let top = scores.max()!, weights = scores.map { exp($0 - top) }, total = weights.reduce(0, +)
        return (0 ..< headDim).map { c in
            (0 ... position).map { weights[$0] * Double(x.values[$0, kv * headDim + c]) }.reduce(0, +) / total
        }
    }

    @Test(arguments: [(0, 1300), (1229, 1300), (1299, 1300), (400, 600), (0, 5)])
    func causalAttention_matchesDefinitionAcrossKeyTiles(first: Int, end: Int) {
        #expect(Kernels.attentionKeyTile < 1300)   // the long cases span several tiles
        let x = Self.inputs(keys: end)
        let out = Self.attention(x, positions: first ..< end)
        var worst = 0.0
        for position in stride(from: first, to: end, by: max(1, (end - first) / 97)) {
            for head in 0 ..< Self.heads {
                let expected = Self.definition(x, position: position, head: head)
                for c in 0 ..< Self.headDim {
                    worst = max(worst, abs(Double(out[position - first, head * Self.headDim + c]) - expected[c]))
                }
            }
        }
        #expect(worst <= 2e-6, "worst |Δ| = \(worst)")
    }

    /// Workers change no bit. Batching may move the last bits (BLAS picks other kernels for
    /// other matrix shapes), never more: the cache-exactness tolerance rests on this.
    @Test func causalAttention_workersChangeNoBitAndBatchingOnlyRounding() {
        let x = Self.inputs(keys: 1300)
        let whole = Self.attention(x, positions: 0 ..< 1300, workers: 2)
        #expect(Self.attention(x, positions: 0 ..< 1300, workers: 1).toArray().map(\.bitPattern) == whole.toArray().map(\.bitPattern))
        for range in [1223 ..< 1300, 700 ..< 701, 1299 ..< 1300, 500 ..< 530] {
            let one = Self.attention(x, positions: range, workers: 1).toArray(), two = Self.attention(x, positions: range, workers: 2).toArray()
            #expect(one.map(\.bitPattern) == two.map(\.bitPattern), "positions \(range)")
            let worst = zip(one, whole.rows(range).toArray()).map { abs($0 - $1) }.max() ?? 0
            #expect(worst <= 1e-6, "positions \(range): batching moved an output by \(worst)")
        }
    }
}
