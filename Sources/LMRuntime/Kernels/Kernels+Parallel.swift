import CKernels
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

    /// Whether ``balancedBands(_:minimumPerBand:alignment:_:)`` lets threads take over the rest of
    /// another's band (`KVSESSION_BALANCE=0` turns it off: every band then stays with its thread).
    static let balancing = ProcessInfo.processInfo.environment["KVSESSION_BALANCE"] != "0"

    /// ``parallelBands(_:minimumPerBand:alignment:_:)`` for work whose results do not depend on
    /// where it is cut, so that no thread waits long for a slower one: each thread claims its own
    /// band from the front, half of what is left at a time, and a thread that has finished its band
    /// claims from the back of another's, in runs of `alignment` items or more (`kv_band_claim_front`,
    /// `kv_band_claim_back`). `body(thread, range, following)` gets the index of the thread running it
    /// (for private scratch; a thread may run parts of several bands), the range, and how many items
    /// of the band follow the range when the thread will probably run them next (0 when none do or
    /// the range was taken from another's band), so that it can prefetch the first of them.
    ///
    /// Why: in a decode step each thread streams its band of every projection from memory, and the
    /// two cores' shares of the bandwidth drift, so with fixed bands one core waited for the other
    /// at the end of about every region (on a Zen 5 in the fast memory state about 2-3% of a token).
    static func balancedBands(_ count: Int, minimumPerBand: Int, alignment: Int, _ body: (Int, Range<Int>, Int) -> Void) {
        let pool = pool
        let bands = max(1, min(workerCount, count / max(1, minimumPerBand)))
        guard bands > 1, balancing, threadCount >= bands else {
            parallelBands(count, minimumPerBand: minimumPerBand, alignment: alignment) { body($0, $1, 0) }
            return
        }
        let chunks = (count + alignment - 1) / alignment, stride = 16   // a band's word per 128 bytes
        func start(_ band: Int) -> Int { bandStart(band, of: bands, count: chunks, alignment: 1) }
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: bands * stride) { words in
            let words = words.baseAddress!
            for band in 0 ..< bands { kv_band_reset(words + band * stride, Int64(start(band + 1) - start(band))) }
            pool.run(participants: bands) { thread in
                func drain(_ band: Int, own: Bool) {
                    let end = min(count, start(band + 1) * alignment)
                    var taken: Int64 = 0
                    while true {
                        let first = own ? kv_band_claim_front(words + band * stride, &taken)
                                        : kv_band_claim_back(words + band * stride, &taken)
                        guard first >= 0 else { return }
                        let lower = (start(band) + Int(first)) * alignment, upper = min(end, lower + Int(taken) * alignment)
                        body(thread, lower ..< upper, own ? end - upper : 0)
                    }
                }
                drain(thread, own: true)
                for offset in 1 ..< bands { drain((thread + offset) % bands, own: false) }
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
