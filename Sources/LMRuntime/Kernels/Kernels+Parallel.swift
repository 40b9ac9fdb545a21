import COpenBLAS
import Foundation
import Synchronization

extension Kernels {
    /// The most threads a kernel splits its work over: the machine's active cores.
    package static let workerCount = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// Threads the kernels use from now on, `1...workerCount` (default: all). Values
    /// outside that range are clamped. Results do not depend on it, on any CPU: the work is
    /// cut into the same bands whatever the thread count (see ``parallelBands(_:minimumPerBand:alignment:_:)``),
    /// and fewer threads only take more bands each (tested bit for bit).
    package static var threadCount: Int {
        get { threadLimit.load(ordering: .relaxed) }
        set { threadLimit.store(min(max(1, newValue), workerCount), ordering: .relaxed) }
    }

    private static let threadLimit = Atomic<Int>(workerCount)

    /// The runtime's threads. Creating it holds OpenBLAS to one thread for the process:
    /// from then on all parallelism is the pool's (see ``WorkerPool``).
    static let pool: WorkerPool = {
        openblas_set_num_threads(1)
        return WorkerPool(width: workerCount)
    }()

    /// Runs `body` over `0..<count` cut into contiguous bands (each starting on a multiple of
    /// `alignment`), in parallel when each band gets at least `minimumPerBand` items.
    ///
    /// The cut depends on `count`, `minimumPerBand`, `alignment` and ``workerCount`` only, never
    /// on ``threadCount``: with fewer threads each one runs several bands. This is what makes
    /// results independent of the thread count on every CPU. OpenBLAS's sgemm does not give a
    /// column the same arithmetic in every call shape: on its Haswell/Zen kernels the products
    /// of a column band differ in the last bits from the same columns of a wider call (edge
    /// tiles accumulate differently), whatever the band alignment; the SSE and AVX kernels
    /// (Prescott ... Sandybridge) happen not to. The same calls, with the same shapes, are exact.
    static func parallelBands(_ count: Int, minimumPerBand: Int, alignment: Int = 1,
                              _ body: (Range<Int>) -> Void) {
        parallelBands(count, minimumPerBand: minimumPerBand, alignment: alignment) { _, range in body(range) }
    }

    /// ``parallelBands(_:minimumPerBand:alignment:_:)`` telling `body` the band's index too
    /// (`0..<workerCount`): no two threads run the same band at once, so per-band scratch is private.
    static func parallelBands(_ count: Int, minimumPerBand: Int, alignment: Int = 1,
                              _ body: (Int, Range<Int>) -> Void) {
        let pool = pool   // created before any work, serial or not: it holds OpenBLAS to one thread
        let bands = max(1, min(workerCount, count / max(1, minimumPerBand)))
        guard bands > 1 else { body(0, 0 ..< count); return }
        let participants = min(bands, threadCount)
        pool.run(participants: participants) { participant in
            for band in stride(from: participant, to: bands, by: participants) {
                body(band, bandStart(band, of: bands, count: count, alignment: alignment)
                    ..< bandStart(band + 1, of: bands, count: count, alignment: alignment))
            }
        }
    }

    /// Runs `body(worker)` for each worker in `0..<workers` (at most ``workerCount``) on the pool.
    static func parallelWorkers(_ workers: Int, _ body: (Int) -> Void) {
        pool.run(participants: workers, body)
    }

    /// Where band `band` of `bands` starts in `0..<count`: an even split rounded down to `alignment`.
    private static func bandStart(_ band: Int, of bands: Int, count: Int, alignment: Int) -> Int {
        band >= bands ? count : count * band / bands / alignment * alignment
    }
}
