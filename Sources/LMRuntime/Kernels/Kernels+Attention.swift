import Foundation

/// Scratch for ``Kernels/causalAttention(queries:keys:values:output:scratch:headCount:kvHeadCount:)``,
/// one slice per worker, sized once for a model.
public struct AttentionScratch: Sendable {
    /// Worker count the scratch has room for.
    public let workers: Int
    let scores: Matrix    // [workers * group * blockRows, contextLength]
    let queries: Matrix   // [workers * group * blockRows, headDim]
    let outputs: Matrix   // [workers * group * blockRows, headDim]
    let inverseSums: Matrix   // [workers * group * blockRows, 1]: 1 / Σ exp per score row
    let rowsPerWorker: Int

    /// Scratch for a model with `headCount / kvHeadCount` query heads per K/V head.
    public init(headCount: Int, kvHeadCount: Int, headDim: Int, contextLength: Int, workers: Int) {
        self.workers = max(1, min(workers, kvHeadCount))
        rowsPerWorker = headCount / kvHeadCount * Kernels.attentionBlockRows
        scores = .zeros(rows: self.workers * rowsPerWorker, cols: contextLength)
        queries = .zeros(rows: self.workers * rowsPerWorker, cols: headDim)
        outputs = .zeros(rows: self.workers * rowsPerWorker, cols: headDim)
        inverseSums = .zeros(rows: self.workers * rowsPerWorker, cols: 1)
    }

    func slice(_ worker: Int) -> (scores: Matrix, queries: Matrix, outputs: Matrix, inverseSums: Matrix) {
        let rows = worker * rowsPerWorker ..< (worker + 1) * rowsPerWorker
        return (scores.rows(rows), queries.rows(rows), outputs.rows(rows), inverseSums.rows(rows))
    }
}

extension Kernels {
    /// Query positions per attention block: the causal mask wastes at most half a block
    /// of scores per row, and the GQA group stacks `group` blocks into one GEMM.
    package static let attentionBlockRows = 64

    /// Causal grouped-query attention of `T` new queries against every cached key.
    ///
    /// The queries sit at positions `P ..< P + T`, where `P = keys.rows - T`. For each
    /// K/V head and block of positions, the queries of all heads sharing that K/V head
    /// are stacked (`[group · block, headDim]`), so scores are one GEMM against the keys
    /// the block can see, then a masked softmax per row, then one GEMM with the values.
    /// K/V heads are spread over the scratch's workers.
    /// - Parameters:
    ///   - queries: `[T, headCount * headDim]`, already rotated.
    ///   - keys: `[P + T, kvHeadCount * headDim]` (cache rows, the new ones included).
    ///   - values: same shape as `keys`.
    ///   - output: `[T, headCount * headDim]`, overwritten.
    ///   - scratch: sized for this model; its score rows are at least `P + T` long.
    ///   - headCount: query heads; a multiple of `kvHeadCount`.
    ///   - kvHeadCount: key/value heads; query head `h` reads K/V head `h / (headCount / kvHeadCount)`.
    package static func causalAttention(queries: Matrix, keys: Matrix, values: Matrix, output: Matrix,
                                       scratch: AttentionScratch, headCount: Int, kvHeadCount: Int) {
        let t = queries.rows, group = headCount / kvHeadCount, headDim = queries.cols / headCount
        precondition(keys.rows >= t && values.rows == keys.rows && output.rows == t, "attention shape mismatch")
        precondition(scratch.scores.cols >= keys.rows && scratch.rowsPerWorker == group * attentionBlockRows
            && scratch.queries.cols == headDim, "attention scratch does not fit")
        // Parallel heads pay off once a head's work outweighs a hand-off to the pool's spinning
        // helpers (a few microseconds): from about two thousand query-key pairs per head.
        let workers = t * keys.rows >= 2_048 ? min(scratch.workers, threadCount) : 1
        parallelWorkers(workers) { worker in
            let (scores, stackedQueries, stackedOutputs, inverseSums) = scratch.slice(worker)
            for kvHead in stride(from: worker, to: kvHeadCount, by: workers) {
                let kvCols = kvHead * headDim ..< (kvHead + 1) * headDim
                for start in stride(from: 0, to: t, by: attentionBlockRows) {
                    let rows = start ..< min(t, start + attentionBlockRows)
                    let stacked = group * rows.count
                    for i in 0 ..< group {
                        let head = kvHead * group + i
                        copy(queries.rows(rows).columns(head * headDim ..< (head + 1) * headDim),
                             into: stackedQueries.rows(i * rows.count ..< (i + 1) * rows.count))
                    }
                    attendBlock(queries: stackedQueries.rows(0 ..< stacked), firstPosition: keys.rows - t + start,
                                blockRows: rows.count, keys: keys.columns(kvCols), values: values.columns(kvCols),
                                output: stackedOutputs.rows(0 ..< stacked), scores: scores, inverseSums: inverseSums)
                    for i in 0 ..< group {
                        let head = kvHead * group + i
                        copy(stackedOutputs.rows(i * rows.count ..< (i + 1) * rows.count),
                             into: output.rows(rows).columns(head * headDim ..< (head + 1) * headDim))
                    }
                }
            }
        }
    }

    /// Stacked queries (row `r` is position `firstPosition + r % blockRows`) against keys/values
    /// `[≥ firstPosition + blockRows, headDim]`; writes `output` `[rows, headDim]`.
    ///
    /// The weights are left unnormalised (`exp(s - max)`); each output row is divided by its
    /// sum after the value GEMM, which saves a pass over the scores.
    private static func attendBlock(queries: Matrix, firstPosition: Int, blockRows: Int, keys: Matrix,
                                    values: Matrix, output: Matrix, scores: Matrix, inverseSums: Matrix) {
        let visible = firstPosition + blockRows
        let block = scores.rows(0 ..< queries.rows).columns(0 ..< visible)
        let scale = 1 / Float(queries.cols).squareRoot()
        matmul(queries, transposed: keys.rows(0 ..< visible), into: block, alpha: scale)
        for r in 0 ..< queries.rows {
            let allowed = firstPosition + r % blockRows + 1   // causal: a position sees keys up to itself
            let row = block.base + r * block.rowStride
            inverseSums.base[r] = 1 / exponentiate(row, count: allowed)
            if allowed < visible { (row + allowed).update(repeating: 0, count: visible - allowed) }
        }
        matmul(block, values.rows(0 ..< visible), into: output)
        for r in 0 ..< output.rows {
            let row = output.base + r * output.rowStride, inverse = inverseSums.base[r]
            for c in 0 ..< output.cols { row[c] *= inverse }
        }
    }
}
