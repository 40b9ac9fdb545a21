import CKernels
import Foundation
@testable import LMRuntime
import Testing

/// The few-query attention path (decode steps and the new tokens of a cache hit): its two C
/// kernels on every body against their definitions, and whole attention against the
/// double-precision definition for model shapes that exercise every tile and edge.
struct FewQueryAttentionTests {
    static func values(_ count: Int, seed: UInt64, scale: Float = 1) -> [Float] {
        let m = Matrix.zeros(rows: 1, cols: count)
        Kernels.fillUniform(m, seed: seed, scale: scale)
        return m.toArray()
    }

    typealias Scores = @Sendable (UnsafePointer<Float>, Int, Int, UnsafePointer<Float>, Int, Int, Int,
                                  UnsafeMutablePointer<Float>, Int, Float) -> Void

    /// Each score is scale · q·k whatever the body, and the same bits whichever tile computed it
    /// (every query alone gives what the whole block gives).
    @Test(arguments: [("dispatched", kv_attention_scores as Scores), ("portable", kv_attention_scores_portable as Scores)])
    func attentionScores_matchDefinitionAndAreTileInvariant(name: String, body: Scores) {
        for d in [3, 8, 20, 64] {
            for (rows, n) in [(1, 1), (3, 4), (4, 13), (7, 130), (12, 9)] {
                let ldq = d + 3, ldk = d + 5, lds = n + 2, scale: Float = 0.37
                let q = Self.values(rows * ldq, seed: UInt64(d * 100 + rows)), k = Self.values(n * ldk, seed: UInt64(d * 100 + n + 50))
                var s = [Float](repeating: .nan, count: rows * lds), alone = s
                body(q, ldq, rows, k, ldk, n, d, &s, lds, scale)
                for r in 0 ..< rows {
                    q.withUnsafeBufferPointer { qp in
                        alone.withUnsafeMutableBufferPointer { body(qp.baseAddress! + r * ldq, ldq, 1, k, ldk, n, d, $0.baseAddress! + r * lds, lds, scale) }
                    }
                }
                var worst = 0.0
                for r in 0 ..< rows {
                    for j in 0 ..< n {
                        let exact = (0 ..< d).map { Double(q[r * ldq + $0]) * Double(k[j * ldk + $0]) }.reduce(0, +) * Double(scale)
                        worst = max(worst, abs(Double(s[r * lds + j]) - exact))
                        #expect(s[r * lds + j].bitPattern == alone[r * lds + j].bitPattern, "\(name) d=\(d) rows=\(rows) n=\(n) [\(r), \(j)]")
                    }
                }
                #expect(worst <= 1e-5, "\(name) d=\(d) rows=\(rows) n=\(n): worst |Δ| = \(worst)")
            }
        }
    }

    typealias WeightedRows = @Sendable (UnsafeMutablePointer<Float>, Int, Int, UnsafePointer<Float>, Int,
                                        UnsafePointer<Float>, Int, Int, Int) -> Void

    /// o += p·v on every body, with each output row the same bits whether computed alone or in
    /// a block of three (the register tile) or at a column edge.
    @Test(arguments: [("dispatched", kv_weighted_rows_add as WeightedRows), ("portable", kv_weighted_rows_add_portable as WeightedRows)])
    func weightedRowsAdd_matchesDefinitionAndIsTileInvariant(name: String, body: WeightedRows) {
        for cols in [3, 8, 20, 64, 70] {
            for (rows, n) in [(1, 1), (3, 5), (4, 130), (7, 17)] {
                let ldo = cols + 1, ldp = n + 3, ldv = cols + 7
                let p = Self.values(rows * ldp, seed: UInt64(cols * 10 + rows)), v = Self.values(n * ldv, seed: UInt64(cols * 10 + n + 7))
                let start = Self.values(rows * ldo, seed: UInt64(cols + 999))
                var o = start, alone = start
                body(&o, ldo, rows, p, ldp, v, ldv, n, cols)
                for r in 0 ..< rows {
                    p.withUnsafeBufferPointer { pp in
                        alone.withUnsafeMutableBufferPointer { body($0.baseAddress! + r * ldo, ldo, 1, pp.baseAddress! + r * ldp, ldp, v, ldv, n, cols) }
                    }
                }
                var worst = 0.0
                for r in 0 ..< rows {
                    for c in 0 ..< cols {
                        let exact = Double(start[r * ldo + c]) + (0 ..< n).map { Double(p[r * ldp + $0]) * Double(v[$0 * ldv + c]) }.reduce(0, +)
                        worst = max(worst, abs(Double(o[r * ldo + c]) - exact))
                        #expect(o[r * ldo + c].bitPattern == alone[r * ldo + c].bitPattern, "\(name) cols=\(cols) rows=\(rows) n=\(n) [\(r), \(c)]")
                    }
                }
                #expect(worst <= 1e-5, "\(name) cols=\(cols) rows=\(rows) n=\(n): worst |Δ| = \(worst)")
            }
        }
    }

    typealias Merge = @Sendable (Int, UnsafePointer<Float>, Int, UnsafePointer<Float>, Int, Int, Int, Int, Int,
                                 UnsafeMutablePointer<Float>, Int) -> Void

    /// Merging parts' partial softmax results: on every body the normalised weighted sum of the
    /// parts' outputs (parts that see no key left out), and the dispatched body the portable
    /// one's bits (the same single-rounding multiply-adds, eight lanes at a time), at head widths
    /// with and without a tail of fewer than eight columns.
    @Test func attendMerge_dispatchedMatchesPortableBitsAndDefinition() {
        for headDim in [3, 8, 20, 64, 70] {
            for (parts, rows, blockRows) in [(1, 3, 1), (2, 6, 2), (4, 12, 4), (3, 7, 7)] {
                let ldo = headDim + 2, statsStride = rows * 2 + 4, oStride = rows * ldo + 3, ldout = (rows / blockRows) * headDim + 5
                let o = Self.values(parts * oStride, seed: UInt64(headDim * 10 + parts))
                var stats = Self.values(parts * statsStride, seed: UInt64(headDim + 77), scale: 3)
                for part in 0 ..< parts {
                    for r in 0 ..< rows {
                        let i = part * statsStride + 2 * r
                        stats[i + 1] = abs(stats[i + 1]) + 0.5                                  // a positive sum of exponentials
                        if parts > 1 && (r + part) % 3 == 0 { stats[i] = -.infinity; stats[i + 1] = 0 }  // this part sees no key
                    }
                }
                let blank = [Float](repeating: .nan, count: blockRows * ldout)
                var fast = blank, portable = blank
                kv_attend_merge(parts, stats, statsStride, o, oStride, ldo, rows, headDim, blockRows, &fast, ldout)
                kv_attend_merge_portable(parts, stats, statsStride, o, oStride, ldo, rows, headDim, blockRows, &portable, ldout)
                var worst = 0.0
                for r in 0 ..< rows {
                    let seen = (0 ..< parts).filter { stats[$0 * statsStride + 2 * r + 1] > 0 }
                    let top = seen.map { Double(stats[$0 * statsStride + 2 * r]) }.max()!
                    let weight = { (part: Int) in exp(Double(stats[part * statsStride + 2 * r]) - top) }
                    let total = seen.map { weight($0) * Double(stats[$0 * statsStride + 2 * r + 1]) }.reduce(0, +)
                    for c in 0 ..< headDim {
                        let at = (r % blockRows) * ldout + (r / blockRows) * headDim + c
                        let exact = seen.map { weight($0) * Double(o[$0 * oStride + r * ldo + c]) }.reduce(0, +) / total
                        worst = max(worst, abs(Double(fast[at]) - exact))
                        #expect(fast[at].bitPattern == portable[at].bitPattern, "headDim=\(headDim) parts=\(parts) [\(r), \(c)]")
                    }
                }
                #expect(worst <= 1e-5, "headDim=\(headDim) parts=\(parts): worst |Δ| = \(worst)")
            }
        }
    }

    /// A model's attention shape: query heads, K/V heads, head width.
    struct Shape: Sendable, CustomTestStringConvertible {
        let heads: Int, kvHeads: Int, headDim: Int
        var testDescription: String { "\(heads)/\(kvHeads) heads × \(headDim)" }
    }

    static let shapes = [Shape(heads: 4, kvHeads: 2, headDim: 8), Shape(heads: 6, kvHeads: 2, headDim: 64),
                         Shape(heads: 3, kvHeads: 1, headDim: 20), Shape(heads: 4, kvHeads: 2, headDim: 16)]

    static func attention(_ shape: Shape, queries: Matrix, keys: Matrix, values: Matrix, workers: Int) -> Matrix {
        let out = Matrix.zeros(rows: queries.rows, cols: queries.cols)
        let scratch = AttentionScratch(headCount: shape.heads, kvHeadCount: shape.kvHeads, headDim: shape.headDim,
                                       contextLength: keys.rows, workers: workers)
        Kernels.causalAttention(queries: queries, keys: keys, values: values, output: out, scratch: scratch,
                                headCount: shape.heads, kvHeadCount: shape.kvHeads)
        return out
    }

    /// Up to ``Kernels/fewQueryLimit`` queries over 1 to 11 key tiles (one part, three, six, and eight
    /// parts of unequal length): every output within 2e-6 of softmax attention in double precision,
    /// and the same bits on one worker as on two (whichever thread runs a part).
    @Test(arguments: shapes)
    func causalAttention_fewQueriesMatchDefinitionOnAnyWorkers(shape: Shape) {
        #expect(Kernels.fewQueryLimit >= 16 && Kernels.fewQueryKeyTile < 1300 / 4)
        for (t, keyCount) in [(1, 1), (1, 5), (4, 1300), (16, 1300), (1, 1300), (7, 300), (Kernels.fewQueryLimit, 700)] {
            let q = Matrix.zeros(rows: t, cols: shape.heads * shape.headDim)
            let k = Matrix.zeros(rows: keyCount, cols: shape.kvHeads * shape.headDim), v = Matrix.zeros(rows: keyCount, cols: k.cols)
            Kernels.fillUniform(q, seed: 11, scale: 2)
            Kernels.fillUniform(k, seed: 12, scale: 2)
            Kernels.fillUniform(v, seed: 13, scale: 1)
            for r in 0 ..< keyCount { for c in 0 ..< k.cols { k[r, c] += Float(r) / Float(keyCount) * 3 } }   // later maxima rise
            let out = Self.attention(shape, queries: q, keys: k, values: v, workers: 2)
            let one = Self.attention(shape, queries: q, keys: k, values: v, workers: 1)
            #expect(out.toArray().map(\.bitPattern) == one.toArray().map(\.bitPattern), "t=\(t) keys=\(keyCount)")
            var worst = 0.0
            let group = shape.heads / shape.kvHeads, scale = 1 / Double(shape.headDim).squareRoot()
            for p in 0 ..< t {
                let position = keyCount - t + p
                for head in 0 ..< shape.heads {
                    let kv = head / group
                    let scores = (0 ... position).map { key in
                        (0 ..< shape.headDim).map { Double(q[p, head * shape.headDim + $0]) * Double(k[key, kv * shape.headDim + $0]) }
                            .reduce(0, +) * scale
                    }
                    let top = scores.max()!, weights = scores.map { exp($0 - top) }, total = weights.reduce(0, +)
                    for c in 0 ..< shape.headDim {
                        let exact = (0 ... position).map { weights[$0] * Double(v[$0, kv * shape.headDim + c]) }.reduce(0, +) / total
                        worst = max(worst, abs(Double(out[p, head * shape.headDim + c]) - exact))
                    }
                }
            }
            #expect(worst <= 2e-6, "t=\(t) keys=\(keyCount): worst |Δ| = \(worst)")
        }
    }
}
