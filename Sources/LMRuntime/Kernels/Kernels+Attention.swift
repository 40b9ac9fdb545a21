extension Kernels {
    /// Query rows processed per attention block: large enough for efficient
    /// GEMMs, small enough that the causal mask wastes little work.
    public static let attentionBlockRows = 128

    /// Causal grouped-query attention of `T` new queries against every cached key.
    ///
    /// The queries sit at positions `P ..< P + T`, where `P = keys.rows - T`.
    /// Per head and per block of query rows, scores are one GEMM against the
    /// keys the block can see, a masked softmax, then one GEMM with the values.
    /// - Parameters:
    ///   - queries: `[T, headCount * headDim]`, already rotated.
    ///   - keys: `[P + T, kvHeadCount * headDim]` (cache rows, the new ones included).
    ///   - values: same shape as `keys`.
    ///   - output: `[T, headCount * headDim]`, overwritten.
    ///   - scores: scratch `[attentionBlockRows, ≥ P + T]`.
    ///   - headCount: query heads; a multiple of `kvHeadCount`.
    ///   - kvHeadCount: key/value heads; query head `h` reads K/V head `h / (headCount / kvHeadCount)`.
    public static func causalAttention(queries: Matrix, keys: Matrix, values: Matrix, output: Matrix,
                                       scores: Matrix, headCount: Int, kvHeadCount: Int) {
        let t = queries.rows, headDim = queries.cols / headCount
        let past = keys.rows - t
        precondition(past >= 0 && values.rows == keys.rows && output.rows == t, "attention shape mismatch")
        precondition(scores.cols >= keys.rows && scores.rows >= min(t, attentionBlockRows), "attention scratch too small")
        let group = headCount / kvHeadCount
        let scale = 1 / Float(headDim).squareRoot()
        for head in 0 ..< headCount {
            let cols = head * headDim ..< (head + 1) * headDim
            let kvCols = (head / group) * headDim ..< (head / group + 1) * headDim
            for start in stride(from: 0, to: t, by: attentionBlockRows) {
                let end = min(t, start + attentionBlockRows)
                let visible = past + end
                let block = scores.rows(0 ..< end - start).columns(0 ..< visible)
                matmul(queries.rows(start ..< end).columns(cols),
                       transposed: keys.rows(0 ..< visible).columns(kvCols), into: block, alpha: scale)
                for r in 0 ..< end - start {
                    let allowed = past + start + r + 1
                    softmax(block, row: r, count: allowed)
                    let row = block.base + r * block.rowStride
                    if allowed < visible { (row + allowed).update(repeating: 0, count: visible - allowed) }
                }
                matmul(block, values.rows(0 ..< visible).columns(kvCols),
                       into: output.rows(start ..< end).columns(cols))
            }
        }
    }
}
