import COpenBLAS

/// The numeric kernels of the runtime: the only code that touches raw pointers or `cblas_*`.
///
/// Every kernel takes row-major ``Matrix`` views and writes into views it is
/// given, so nothing here allocates. Shapes are stated as `[rows, cols]`.
public enum Kernels {
    /// `c = alpha * a · bᵀ + beta * c`: the projection kernel (weights stored `[out, in]`).
    ///
    /// A single-row `a` (decode) goes through `sgemv`, which streams `b` once.
    /// - Parameters:
    ///   - a: activations `[M, K]`.
    ///   - b: weights `[N, K]`.
    ///   - c: output `[M, N]`; with `beta == 1` the product is added to it (residuals).
    public static func matmul(_ a: Matrix, transposed b: Matrix, into c: Matrix,
                              alpha: Float = 1, beta: Float = 0) {
        precondition(a.cols == b.cols && c.rows == a.rows && c.cols == b.rows, "matmul shape mismatch")
        guard a.rows > 0, b.rows > 0 else { return }
        if a.rows == 1 {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, Int32(b.rows), Int32(b.cols), alpha,
                        b.base, Int32(b.rowStride), a.base, 1, beta, c.base, 1)
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(a.rows), Int32(b.rows), Int32(a.cols),
                        alpha, a.base, Int32(a.rowStride), b.base, Int32(b.rowStride),
                        beta, c.base, Int32(c.rowStride))
        }
    }

    /// `c = a · b`: mixes value rows by attention weights.
    /// - Parameters:
    ///   - a: weights `[M, K]`.
    ///   - b: values `[K, N]`.
    ///   - c: output `[M, N]`, overwritten.
    public static func matmul(_ a: Matrix, _ b: Matrix, into c: Matrix) {
        precondition(a.cols == b.rows && c.rows == a.rows && c.cols == b.cols, "matmul shape mismatch")
        guard a.rows > 0, b.cols > 0 else { return }
        if a.rows == 1 {
            cblas_sgemv(CblasRowMajor, CblasTrans, Int32(b.rows), Int32(b.cols), 1,
                        b.base, Int32(b.rowStride), a.base, 1, 0, c.base, 1)
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(a.rows), Int32(b.cols), Int32(a.cols),
                        1, a.base, Int32(a.rowStride), b.base, Int32(b.rowStride), 0, c.base, Int32(c.rowStride))
        }
    }

    /// The number of threads OpenBLAS runs its kernels on.
    public static var blasThreadCount: Int { Int(openblas_get_num_threads()) }

    /// Sets the number of threads OpenBLAS uses (at least 1).
    public static func setBLASThreadCount(_ count: Int) { openblas_set_num_threads(Int32(max(1, count))) }
}
