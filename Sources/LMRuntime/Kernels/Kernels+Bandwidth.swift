import CKernels

extension Kernels {
    /// Reads every element of the dense `matrix` once, split into contiguous bands over
    /// `workers` of the pool (each band read as two streams, its halves in lockstep), and returns
    /// the sum: a streaming read with no writes, the memory-bandwidth ceiling `kvbench kernels`
    /// compares decode with.
    package static func streamingSum(_ matrix: Matrix, workers: Int = workerCount) -> Float {
        precondition(matrix.rowStride == matrix.cols, "a streaming read needs a dense matrix")
        let count = matrix.rows * matrix.cols, workers = max(1, min(workers, workerCount))
        return sum(over: workers) { worker in
            let start = count * worker / workers / 16 * 16, end = worker == workers - 1 ? count : count * (worker + 1) / workers / 16 * 16
            return kv_sum(matrix.base + start, end - start)
        }
    }

    /// Converts and sums the `count` halfs at `halfs` `passes` times over on each of `workers`
    /// workers at once, and returns the total: with `count` small enough to stay in each core's
    /// cache, the rate at which the machine turns half weights into floats, which caps any
    /// kernel streaming them (`kvbench kernels` reports f16 decode against it).
    package static func repeatedHalfSums(_ halfs: UnsafePointer<UInt16>, count: Int, passes: Int,
                                         workers: Int = workerCount) -> Float {
        sum(over: max(1, min(workers, workerCount))) { _ in
            var sum: Float = 0
            for _ in 0 ..< passes { sum += kv_sum_halfs(halfs, count) }
            return sum
        }
    }

    /// The sum of `body(worker)` over `workers` workers of the pool running at once.
    private static func sum(over workers: Int, _ body: (Int) -> Float) -> Float {
        let partials = Matrix.zeros(rows: 1, cols: workers)
        parallelWorkers(workers) { worker in partials.base[worker] = body(worker) }
        return (0 ..< workers).map { partials.base[$0] }.reduce(0, +)
    }
}
