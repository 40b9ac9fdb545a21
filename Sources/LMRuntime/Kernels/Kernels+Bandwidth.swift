import CKernels

extension Kernels {
    /// Reads every element of the dense `matrix` once, split into contiguous bands over
    /// `workers` of the pool (each band read as `streams` streams, 1 to 8: its equal parts in
    /// lockstep), and returns the sum: a streaming read with no writes, the memory-bandwidth
    /// ceiling `kvbench kernels` compares decode with (at the stream count that reads fastest).
    package static func streamingSum(_ matrix: Matrix, workers: Int = workerCount, streams: Int = 2) -> Float {
        precondition(matrix.rowStride == matrix.cols, "a streaming read needs a dense matrix")
        let count = matrix.rows * matrix.cols, workers = max(1, min(workers, workerCount))
        return sum(over: workers) { worker in
            let start = count * worker / workers / 16 * 16, end = worker == workers - 1 ? count : count * (worker + 1) / workers / 16 * 16
            return kv_sum_streams(matrix.base + start, end - start, Int32(streams))
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

    /// `c = a · bᵀ` with `b`'s rows cut into one band per worker, each worker running OpenBLAS's
    /// sgemm on one thread over its band, all at once; returns each worker's FLOP/s. Their sum is
    /// what the cores can do together at that moment for kernels that balance their work between
    /// the threads (a band ends when its thread does): `kvbench kernels` pairs each incremental
    /// pass with it, as it pairs decode with a read, so a slow spell of one core on a shared host
    /// moves the ceiling with the pass.
    package static func bandedSGEMMRates(_ a: Matrix, transposed b: Matrix, into c: Matrix,
                                         workers: Int = workerCount) -> [Double] {
        precondition(a.cols == b.cols && c.rows == a.rows && c.cols == b.rows, "banded sgemm shape mismatch")
        let workers = max(1, min(workers, workerCount, b.rows))
        let rates = Matrix.zeros(rows: 1, cols: workers), clock = ContinuousClock()
        parallelWorkers(workers) { worker in
            let band = b.rows * worker / workers ..< b.rows * (worker + 1) / workers
            let elapsed = clock.measure {
                sgemm(a, transposed: b.rows(band), into: c.columns(band), alpha: 1, beta: 0)
            }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            rates.base[worker] = Float(2 * Double(a.rows * band.count * a.cols) / max(seconds, 1e-9))
        }
        return (0 ..< workers).map { Double(rates.base[$0]) }
    }

    /// The sum of `body(worker)` over `workers` workers of the pool running at once.
    private static func sum(over workers: Int, _ body: (Int) -> Float) -> Float {
        let partials = Matrix.zeros(rows: 1, cols: workers)
        parallelWorkers(workers) { worker in partials.base[worker] = body(worker) }
        return (0 ..< workers).map { partials.base[$0] }.reduce(0, +)
    }
}
