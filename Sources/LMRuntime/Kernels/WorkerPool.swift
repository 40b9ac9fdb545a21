import Foundation
import Synchronization

/// The runtime's own threads: one parallel region at a time, split over the caller
/// and `helpers` long-lived threads that spin briefly between regions and then park.
///
/// Why not OpenBLAS's threads plus Dispatch for the rest: after every threaded BLAS
/// call OpenBLAS leaves its workers spinning for about 10⁸ cycles, and a Dispatch
/// thread started beside such a spinner often shared a core with it, which doubled
/// the time of attention and the elementwise kernels in about half the passes. Waking
/// a parked thread on a virtual machine also costs tens of microseconds, more than a
/// small GEMM. So OpenBLAS runs single-threaded inside the pool's regions, and the
/// pool keeps its helpers hot for ``spinWindow`` after each region: the regions of
/// one forward pass follow each other well within it.
///
/// Synchronisation: the caller publishes the job under `state`, then bumps
/// `generation`; each helper that sees a new generation runs its share and bumps
/// `finished`. A helper parks only after re-checking `generation` under `parking`,
/// and a caller that bumps `generation` wakes parked helpers under the same lock,
/// so no wake-up is lost.
final class WorkerPool: @unchecked Sendable {
    /// How long a helper keeps polling for the next region before it parks.
    static let spinWindow: Duration = .milliseconds(2)

    /// Threads a region can use, the caller included.
    let width: Int
    private let generation = Atomic<Int>(0)
    private let finished = Atomic<Int>(0)
    private let parkedHelpers = Atomic<Int>(0)
    private let busy = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let parking = NSCondition()
    private let state = Mutex<Job?>(nil)

    private struct Job: @unchecked Sendable {
        let body: (Int) -> Void
        let participants: Int
    }

    /// A pool of `width - 1` helper threads (none when `width` is 1).
    init(width: Int) {
        self.width = max(1, width)
        for index in 1 ..< self.width {
            let thread = Thread { self.helperLoop(index: index) }   // helpers keep the pool alive until shutDown()
            thread.name = "LMRuntime worker \(index)"
            thread.start()
        }
    }

    /// Runs `body(i)` for `i` in `0 ..< participants` (`1...width`), `body(0)` on the
    /// calling thread, and returns when all have finished. When another region holds the
    /// pool (a concurrent caller, or a region started from inside a region), or the pool is
    /// shut down, the calls run one after another on the calling thread instead, so nesting
    /// never deadlocks.
    func run(participants: Int, _ body: (Int) -> Void) {
        precondition(participants >= 1 && participants <= width, "a region has 1...\(width) participants")
        let n = participants
        guard n > 1, !stopped.load(ordering: .relaxed),
              busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            for i in 0 ..< n { body(i) }
            return
        }
        defer { busy.store(false, ordering: .releasing) }
        withoutActuallyEscaping(body) { body in
            state.withLock { $0 = Job(body: body, participants: n) }
            finished.store(0, ordering: .relaxed)
            generation.add(1, ordering: .sequentiallyConsistent)
            if parkedHelpers.load(ordering: .sequentiallyConsistent) > 0 {
                parking.lock()
                parking.broadcast()
                parking.unlock()
            }
            body(0)
            var polls = 0
            while finished.load(ordering: .acquiring) < width - 1 {
                polls += 1
                if polls > 1024 { sched_yield() }   // a helper may be waiting for this core
            }
            state.withLock { $0 = nil }
        }
    }

    /// Ends the helper threads once no region is running; later regions run on the caller.
    /// The process-wide pool never needs this; pools made for tests do.
    func shutDown() {
        while !busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {}
        stopped.store(true, ordering: .sequentiallyConsistent)
        generation.add(1, ordering: .sequentiallyConsistent)
        parking.lock()
        parking.broadcast()
        parking.unlock()
        busy.store(false, ordering: .releasing)
    }

    private func helperLoop(index: Int) {
        var seen = 0
        let clock = ContinuousClock()
        while !stopped.load(ordering: .acquiring) {
            var deadline = clock.now.advanced(by: Self.spinWindow)
            var polls = 0
            while generation.load(ordering: .acquiring) == seen {
                polls += 1
                if polls > 1024 { sched_yield() }   // polite to other threads on a busy machine
                guard polls % 256 == 0, clock.now > deadline else { continue }
                park(while: seen)
                deadline = clock.now.advanced(by: Self.spinWindow)
            }
            seen = generation.load(ordering: .acquiring)
            if stopped.load(ordering: .acquiring) { return }
            if let job = state.withLock({ $0 }), index < job.participants { job.body(index) }
            finished.add(1, ordering: .releasing)
        }
    }

    private func park(while seen: Int) {
        parking.lock()
        parkedHelpers.add(1, ordering: .sequentiallyConsistent)
        while generation.load(ordering: .sequentiallyConsistent) == seen { parking.wait() }
        parkedHelpers.subtract(1, ordering: .sequentiallyConsistent)
        parking.unlock()
    }
}
