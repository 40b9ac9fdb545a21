import CKernels
import Foundation

/// Scratch for ``Kernels/causalAttention(queries:keys:values:output:scratch:headCount:kvHeadCount:)``,
/// one slice per worker, sized once for a model.
public struct AttentionScratch: Sendable {
    /// Worker count the scratch has room for.
    public let workers: Int
    let scores: Matrix    // [workers * group * blockRows, min(contextLength, attentionKeyTile)]
    let queries: Matrix   // [workers * group * blockRows, headDim]
    let outputs: Matrix   // [workers * group * blockRows, headDim]
    let rowStats: Matrix  // [workers * group * blockRows, 2]: running max and Σ exp per score row
    let rowsPerWorker: Int
    let partOutputs: Matrix  // [kvHeadCount * attentionParts * rowsPerPart, headDim]: few queries, per key part
    let partStats: Matrix    // [kvHeadCount * attentionParts * rowsPerPart, 2]: each part's maximum and Σ exp per row
    let rowsPerPart: Int     // group * fewQueryLimit
    let partWork: Matrix     // [workers, kv_attend_work_floats(kvHeadCount, rowsPerPart, headDim, fewQueryKeyTile)]

    /// Scratch for a model with `headCount / kvHeadCount` query heads per K/V head. Its size
    /// does not grow with the context beyond one tile of keys (``Kernels/attentionKeyTile``).
    public init(headCount: Int, kvHeadCount: Int, headDim: Int, contextLength: Int, workers: Int) {
        self.workers = max(1, workers)
        rowsPerWorker = headCount / kvHeadCount * Kernels.attentionBlockRows
        let blocked = min(self.workers, kvHeadCount) * rowsPerWorker   // the blocked path splits K/V heads only
        scores = .zeros(rows: blocked, cols: min(contextLength, Kernels.attentionKeyTile))
        queries = .zeros(rows: blocked, cols: headDim)
        outputs = .zeros(rows: blocked, cols: headDim)
        rowStats = .zeros(rows: blocked, cols: 2)
        rowsPerPart = headCount / kvHeadCount * Kernels.fewQueryLimit
        partOutputs = .zeros(rows: kvHeadCount * Kernels.attentionParts * rowsPerPart, cols: headDim)
        partStats = .zeros(rows: kvHeadCount * Kernels.attentionParts * rowsPerPart, cols: 2)
        partWork = .zeros(rows: self.workers, cols: kv_attend_work_floats(kvHeadCount, rowsPerPart, headDim, Kernels.fewQueryKeyTile))
    }

    /// Bytes the scratch holds.
    public var byteCount: Int {
        [scores, queries, outputs, rowStats, partOutputs, partStats, partWork].map { $0.rows * $0.cols * 4 }.reduce(0, +)
    }

    func slice(_ worker: Int) -> (scores: Matrix, queries: Matrix, outputs: Matrix, rowStats: Matrix) {
        let rows = worker * rowsPerWorker ..< (worker + 1) * rowsPerWorker
        return (scores.rows(rows), queries.rows(rows), outputs.rows(rows), rowStats.rows(rows))
    }
}

extension Kernels {
    /// Query positions per attention block: the causal mask wastes at most half a block
    /// of scores per row, and the GQA group stacks `group` blocks into one GEMM.
    package static let attentionBlockRows = 64

    /// Keys per score tile: attention walks the visible keys in tiles this long, keeping a
    /// running maximum and sum per row (an online softmax), so its scratch is sized by the
    /// batch and this tile, never by the context. Tiles start at absolute key positions, so a
    /// query's arithmetic does not depend on how its batch was split.
    package static let attentionKeyTile = 512

    /// The most new tokens a pass has for attention to take the few-query path (``kv_attend_keys``:
    /// register-tiled scores and weighted values in C, keys split into parts over the workers).
    /// On a Zen 1 host, 20 and 30 new tokens on 3,030 cached spent 5–10% less time in attention
    /// on this path than on the blocked BLAS one; at 48 and 64 the two were even.
    /// (`KVSESSION_FEW_QUERIES` overrides it, for measuring one path against the other.)
    package static let fewQueryLimit = ProcessInfo.processInfo.environment["KVSESSION_FEW_QUERIES"].flatMap { Int($0) } ?? 32

    /// Keys per tile on the few-query path (their key and value rows stay in L2 between the two
    /// products). Tiles start at absolute key positions.
    package static let fewQueryKeyTile = 128

    /// The most parts the few-query path splits the visible keys into, so that a decode step
    /// spreads over the threads whatever the model's K/V head count, and a thread that finishes
    /// early can take over parts of a slower one's run. Fixed, never the thread count: a query's
    /// arithmetic does not depend on how many threads ran it.
    package static let attentionParts = 8

    /// Causal grouped-query attention of `T` new queries against every cached key.
    ///
    /// The queries sit at positions `P ..< P + T`, where `P = keys.rows - T`. For each
    /// K/V head and block of positions, the queries of all heads sharing that K/V head
    /// are stacked (`[group · block, headDim]`), so scores are one GEMM against the keys
    /// the block can see, then a masked softmax per row, then one GEMM with the values.
    /// K/V heads are spread over the scratch's workers. Passes of at most ``fewQueryLimit``
    /// queries take the few-query path instead (see `attendFew`).
    /// - Parameters:
    ///   - queries: `[T, headCount * headDim]`, already rotated.
    ///   - keys: `[P + T, kvHeadCount * headDim]` (cache rows, the new ones included).
    ///   - values: same shape as `keys`.
    ///   - output: `[T, headCount * headDim]`, overwritten.
    ///   - scratch: sized for this model.
    ///   - headCount: query heads; a multiple of `kvHeadCount`.
    ///   - kvHeadCount: key/value heads; query head `h` reads K/V head `h / (headCount / kvHeadCount)`.
    package static func causalAttention(queries: Matrix, keys: Matrix, values: Matrix, output: Matrix,
                                       scratch: AttentionScratch, headCount: Int, kvHeadCount: Int) {
        let t = queries.rows, group = headCount / kvHeadCount, headDim = queries.cols / headCount
        precondition(keys.rows >= t && values.rows == keys.rows && output.rows == t, "attention shape mismatch")
        precondition(scratch.scores.cols >= min(keys.rows, attentionKeyTile) && scratch.rowsPerWorker == group * attentionBlockRows
            && scratch.queries.cols == headDim && scratch.partStats.rows == kvHeadCount * attentionParts * scratch.rowsPerPart,
                     "attention scratch does not fit")
        if t <= fewQueryLimit {
            attendFew(queries: queries, keys: keys, values: values, output: output, scratch: scratch,
                      group: group, kvHeadCount: kvHeadCount)
            return
        }
        // Parallel heads pay off once a head's work outweighs a hand-off to the pool's spinning
        // helpers (a few microseconds): from about two thousand query-key pairs per head.
        let workers = t * keys.rows >= 2_048 ? min(scratch.workers, threadCount, kvHeadCount) : 1
        parallelWorkers(workers) { worker in
            let (scores, stackedQueries, stackedOutputs, rowStats) = scratch.slice(worker)
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
                                output: stackedOutputs.rows(0 ..< stacked), scores: scores, rowStats: rowStats)
                    for i in 0 ..< group {
                        let head = kvHead * group + i
                        copy(stackedOutputs.rows(i * rows.count ..< (i + 1) * rows.count),
                             into: output.rows(rows).columns(head * headDim ..< (head + 1) * headDim))
                    }
                }
            }
        }
    }

    /// Attention for at most ``fewQueryLimit`` queries: the visible keys are cut into up to
    /// ``attentionParts`` runs of whole ``fewQueryKeyTile`` tiles; each part runs ``kv_attend_keys``
    /// for every K/V head (reading its key and value rows whole, once, and prefetching the next
    /// tile's rows while it computes), each worker taking a run of consecutive parts and, when done,
    /// parts from the end of another's (``balancedBands(_:minimumPerBand:alignment:_:)``), then each
    /// head's parts are merged in order. The cut depends on the key count only, so whichever thread
    /// ran a part, the results are the same bits.
    ///
    /// Why the take-over: the two vCPUs of an Emerald Rapids VM ran these products at different
    /// speeds, one of them at about 0.6 of the other (which one changed over time), so with fixed
    /// runs the fast one waited for the slow one at the end of every layer's attention.
    private static func attendFew(queries: Matrix, keys: Matrix, values: Matrix, output: Matrix,
                                  scratch: AttentionScratch, group: Int, kvHeadCount: Int) {
        let t = queries.rows, headDim = queries.cols / (group * kvHeadCount), rows = group * t
        let tiles = (keys.rows + fewQueryKeyTile - 1) / fewQueryKeyTile, parts = min(tiles, attentionParts)
        // Every part gets a worker, however few the queries: a pass's key and value rows come
        // from DRAM (the projections between two layers' attention stream far more than the
        // caches hold), and one core reading them waits on memory. On a Zen 1 host a decode
        // step's attention over 1,000 cached tokens took 5.0 ms per pass on one worker and 2.9 on two.
        let partRows = scratch.rowsPerPart, headRows = attentionParts * partRows   // scratch rows per part, per head
        let scale = 1 / Float(headDim).squareRoot()
        precondition(keys.rowStride == values.rowStride, "keys and values must share a row stride")
        func start(_ part: Int) -> Int { min(keys.rows, part * tiles / parts * fewQueryKeyTile) }
        withUnsafeTemporaryAllocation(of: Int.self, capacity: workerCount) { ends in
            ends.initialize(repeating: -1)
            // Each thread's parts come in runs of consecutive ones: a run's last tile prefetches the
            // first of the part its thread will probably take next (`following`), which then starts warm.
            func attend(thread: Int, run: Range<Int>, following: Int) {
                let through = start(run.upperBound + (following > 0 ? 1 : 0))
                for part in run {
                    let fetched = part > run.lowerBound || ends[thread] == part
                    kv_attend_keys(queries.base, queries.rowStride, t, group, kvHeadCount, headDim, keys.rows - t,
                                   keys.base, values.base, keys.rowStride, start(part), start(part + 1), through,
                                   fetched ? 1 : 0, fewQueryKeyTile,
                                   scale, scratch.partWork.row(thread).base,
                                   scratch.partStats.base + part * partRows * 2, headRows * 2,
                                   scratch.partOutputs.base + part * partRows * headDim, headDim, headRows * headDim)
                }
                ends[thread] = following > 0 ? run.upperBound : -1
            }
            if scratch.workers >= min(workerCount, parts) {
                balancedBands(parts, minimumPerBand: 1, alignment: 1) { attend(thread: $0, run: $1, following: $2) }
            } else {   // scratch for fewer threads than the pool's: one thread runs every part
                attend(thread: 0, run: 0 ..< parts, following: 0)
            }
        }
        for kvHead in 0 ..< kvHeadCount {
            let first = kvHead * headRows
            kv_attend_merge(parts, scratch.partStats.base + first * 2, partRows * 2,
                            scratch.partOutputs.base + first * headDim, partRows * headDim, headDim, rows, headDim, t,
                            output.base + kvHead * group * headDim, output.rowStride)
        }
    }

    /// Stacked queries (row `r` is position `firstPosition + r % blockRows`) against keys/values
    /// `[≥ firstPosition + blockRows, headDim]`; writes `output` `[rows, headDim]`.
    ///
    /// Keys go by in tiles of ``attentionKeyTile``. Per tile: one score GEMM, then per row the
    /// tile's maximum, `exp(s - max)` and its sum; when a row's maximum grows, its output so far
    /// and its sum are scaled by `exp(old - new)`; then one value GEMM adds the tile. The weights
    /// are left unnormalised; each output row is divided by its sum at the end. With one tile
    /// (contexts up to the tile) this is plain softmax attention, operation for operation.
    private static func attendBlock(queries: Matrix, firstPosition: Int, blockRows: Int, keys: Matrix,
                                    values: Matrix, output: Matrix, scores: Matrix, rowStats: Matrix) {
        let visible = firstPosition + blockRows
        let scale = 1 / Float(queries.cols).squareRoot()
        for tileStart in stride(from: 0, to: visible, by: attentionKeyTile) {
            let tile = tileStart ..< min(visible, tileStart + attentionKeyTile)
            let block = scores.rows(0 ..< queries.rows).columns(0 ..< tile.count)
            matmul(queries, transposed: keys.rows(tile), into: block, alpha: scale)
            for r in 0 ..< queries.rows {
                let allowed = firstPosition + r % blockRows + 1 - tileStart   // causal: keys up to the query's own
                let row = block.base + r * block.rowStride, stats = rowStats.base + r * rowStats.rowStride
                let live = max(0, min(allowed, tile.count))
                if live > 0 {
                    let tileMax = kv_max(row, live)
                    if tileStart == 0 {
                        stats[0] = tileMax
                        stats[1] = kv_exp_sub_sum(row, live, tileMax)
                    } else {
                        let newMax = max(stats[0], tileMax)
                        let sum = kv_exp_sub_sum(row, live, newMax)
                        if newMax > stats[0] {
                            let factor = Foundation.expf(stats[0] - newMax)
                            stats[1] *= factor
                            let out = output.base + r * output.rowStride
                            for c in 0 ..< output.cols { out[c] *= factor }
                        }
                        stats[0] = newMax
                        stats[1] += sum
                    }
                }
                if live < tile.count { (row + live).update(repeating: 0, count: tile.count - live) }
            }
            matmul(block, values.rows(tile), into: output, beta: tileStart == 0 ? 0 : 1)
        }
        for r in 0 ..< output.rows {
            let row = output.base + r * output.rowStride, inverse = 1 / rowStats.base[r * rowStats.rowStride + 1]
            for c in 0 ..< output.cols { row[c] *= inverse }
        }
    }
}
