extension Kernels {
    /// `w += scale · (b · a)` for `b` of `out × rank` and `a` of `rank × in` (a LoRA merge).
    ///
    /// Each element of the product is summed over the rank in order, then scaled and added once:
    /// plain float32 multiplies and adds in a fixed order (no fused multiply-add, no BLAS), so a
    /// merged model has the same bits on every CPU and its fingerprint names it everywhere. The
    /// cost, `out · in · rank` multiply-adds, is paid once per load.
    /// - Precondition: `b.rows == w.rows`, `a.cols == w.cols`, `b.cols == a.rows`.
    package static func addLowRankProduct(_ b: Matrix, _ a: Matrix, scale: Float, to w: Matrix) {
        precondition(b.rows == w.rows && a.cols == w.cols && b.cols == a.rows, "low-rank product shapes disagree")
        let sum = UnsafeMutablePointer<Float>.allocate(capacity: max(1, w.cols))
        defer { sum.deallocate() }
        for i in 0 ..< w.rows {
            sum.update(repeating: 0, count: w.cols)
            for k in 0 ..< a.rows {
                let factor = b[i, k], row = a.base + k * a.rowStride
                for j in 0 ..< w.cols { sum[j] += factor * row[j] }
            }
            let out = w.base + i * w.rowStride
            for j in 0 ..< w.cols { out[j] += scale * sum[j] }
        }
    }
}
