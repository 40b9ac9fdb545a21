import CKernels

extension Kernels {
    /// Reads every element of the dense `matrix` once, split into contiguous bands over
    /// `workers` of the pool, and returns the sum: a streaming read with no writes, the
    /// memory-bandwidth ceiling `kvbench kernels` compares decode with.
    package static func streamingSum(_ matrix: Matrix, workers: Int = workerCount) -> Float {
        precondition(matrix.rowStride == matrix.cols, "a streaming read needs a dense matrix")
        let count = matrix.rows * matrix.cols, workers = max(1, min(workers, workerCount))
        let partials = Matrix.zeros(rows: 1, cols: workers)
        parallelWorkers(workers) { worker in
            let start = count * worker / workers / 16 * 16, end = worker == workers - 1 ? count : count * (worker + 1) / workers / 16 * 16
            partials.base[worker] = kv_sum(matrix.base + start, end - start)
        }
        return (0 ..< workers).map { partials.base[$0] }.reduce(0, +)
    }
}
