extension Kernels {
    /// `w += scale · (b · a)` for `b` of `out × rank` and `a` of `rank × in` (a LoRA merge).
    ///
    /// Each element of the product is summed over the rank in order in double precision, scaled
    /// and added to the weight in double, and rounded to float32 once. Double holds the product of
    /// any two float32 factors exactly and their sums far from its own range, so the result is
    /// the definition to well within float32's rounding, and factors whose product overflows
    /// float32 on the way (huge factors under a tiny scale) leave a finite weight when the update
    /// itself is in range. Plain multiplies and adds in a fixed order (no fused multiply-add, no
    /// BLAS): a merged model has the same bits on every CPU and its fingerprint names it
    /// everywhere. The cost, `out · in · rank` multiply-adds, is paid once per load.
    /// - Returns: the (row, column) of the first merged weight that is not finite (its update
    ///   beyond float32's range), or `nil` when all are. `w` is then partly merged: use a copy.
    /// - Precondition: `b.rows == w.rows`, `a.cols == w.cols`, `b.cols == a.rows`.
    package static func addLowRankProduct(_ b: Matrix, _ a: Matrix, scale: Float,
                                          to w: Matrix) -> (row: Int, column: Int)? {
        precondition(b.rows == w.rows && a.cols == w.cols && b.cols == a.rows, "low-rank product shapes disagree")
        let sum = UnsafeMutablePointer<Double>.allocate(capacity: max(1, w.cols))
        defer { sum.deallocate() }
        let scale = Double(scale)
        var firstNonFinite: (row: Int, column: Int)?
        for i in 0 ..< w.rows {
            sum.update(repeating: 0, count: w.cols)
            for k in 0 ..< a.rows {
                let factor = Double(b[i, k]), row = a.base + k * a.rowStride
                for j in 0 ..< w.cols { sum[j] += factor * Double(row[j]) }
            }
            let out = w.base + i * w.rowStride
            for j in 0 ..< w.cols { out[j] = Float(Double(out[j]) + scale * sum[j]) }
            if firstNonFinite == nil, let j = (0 ..< w.cols).first(where: { !out[$0].isFinite }) { firstNonFinite = (i, j) }
        }
        return firstNonFinite
    }
}
