extension Kernels {
    /// Query rows processed per attention block: large enough for efficient
    /// GEMMs, small enough that the causal mask wastes little work.
    public static let attentionBlockRows = 128

    /// Rows of score scratch ``causalAttention(queries:keys:values:output:scores:headCount:kvHeadCount:)``
    /// needs to run `workers` heads at once.
    public static func attentionScratchRows(workers: Int) -> Int { workers * attentionBlockRows }

    /// Causal grouped-query attention of `T` new queries against every cached key.
    ///
    /// The queries sit at positions `P ..< P + T`, where `P = keys.rows - T`.
    /// Per head and per block of query rows, scores are one GEMM against the
    /// keys the block can see, a masked softmax, then one GEMM with the values.
    /// Heads are spread over the workers the scratch has room for.
    /// - Parameters:
    ///   - queries: `[T, headCount * headDim]`, already rotated.
    ///   - keys: `[P + T, kvHeadCount * headDim]` (cache rows, the new ones included).
    ///   - values: same shape as `keys`.
    ///   - output: `[T, headCount * headDim]`, overwritten.
    ///   - scores: scratch `[workers * attentionBlockRows, ≥ P + T]`.
    ///   - headCount: query heads; a multiple of `kvHeadCount`.
    ///   - kvHeadCount: key/value heads; query head `h` reads K/V head `h / (headCount / kvHeadCount)`.
    public static func causalAttention(queries: Matrix, keys: Matrix, values: Matrix, output: Matrix,
                                       scores: Matrix, headCount: Int, kvHeadCount: Int) {
        let t = queries.rows
        precondition(keys.rows >= t && values.rows == keys.rows && output.rows == t, "attention shape mismatch")
        precondition(scores.cols >= keys.rows && scores.rows >= attentionBlockRows, "attention scratch too small")
        // Parallel heads pay off once a head's work outweighs a thread hand-off (not in decode).
        let worthSplitting = t * keys.rows >= 16_384
        let workers = worthSplitting ? min(scores.rows / attentionBlockRows, headCount, workerCount) : 1
        let headDim = queries.cols / headCount, group = headCount / kvHeadCount
        parallelWorkers(workers) { worker in
            let scratch = scores.rows(worker * attentionBlockRows ..< (worker + 1) * attentionBlockRows)
            for head in stride(from: worker, to: headCount, by: workers) {
                let kvHead = head / group
                attendHead(queries: queries.columns(head * headDim ..< (head + 1) * headDim),
                           keys: keys.columns(kvHead * headDim ..< (kvHead + 1) * headDim),
                           values: values.columns(kvHead * headDim ..< (kvHead + 1) * headDim),
                           output: output.columns(head * headDim ..< (head + 1) * headDim), scores: scratch)
            }
        }
    }

    /// One head: `queries`/`output` `[T, headDim]`, `keys`/`values` `[P + T, headDim]`.
    private static func attendHead(queries: Matrix, keys: Matrix, values: Matrix, output: Matrix, scores: Matrix) {
        let t = queries.rows, past = keys.rows - t
        let scale = 1 / Float(queries.cols).squareRoot()
        for start in stride(from: 0, to: t, by: attentionBlockRows) {
            let end = min(t, start + attentionBlockRows)
            let visible = past + end
            let block = scores.rows(0 ..< end - start).columns(0 ..< visible)
            matmul(queries.rows(start ..< end), transposed: keys.rows(0 ..< visible), into: block, alpha: scale)
            for r in 0 ..< end - start {
                let allowed = past + start + r + 1   // causal: position past+start+r sees keys 0...itself
                let row = block.base + r * block.rowStride
                softmax(row, count: allowed)
                if allowed < visible { (row + allowed).update(repeating: 0, count: visible - allowed) }
            }
            matmul(block, values.rows(0 ..< visible), into: output.rows(start ..< end))
        }
    }
}
