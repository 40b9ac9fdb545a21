import Foundation
@testable import LMRuntime
import Synchronization
import Testing

/// The runtime's thread pool: every participant runs exactly once per region, on its own
/// thread when the pool is free, serially when it is not, and parked helpers wake up.
struct WorkerPoolTests {
    /// Counts, per participant index, how often `body` ran it, and the distinct threads used.
    final class Tally: @unchecked Sendable {
        private let lock = NSLock()
        private var counts: [Int: Int] = [:]
        private var threads: Set<String> = []

        func record(_ index: Int) {
            lock.withLock {
                counts[index, default: 0] += 1
                threads.insert("\(Unmanaged.passUnretained(Thread.current).toOpaque())")
            }
        }

        var snapshot: (counts: [Int: Int], threads: Int) { lock.withLock { (counts, threads.count) } }
    }

    @Test(arguments: [1, 2, 3, 4])
    func run_callsEveryParticipantOnceOnItsOwnThread(participants: Int) {
        let pool = WorkerPool(width: 4)
        defer { pool.shutDown() }
        for _ in 0 ..< 50 {
            let tally = Tally()
            pool.run(participants: participants) { i in
                Thread.sleep(forTimeInterval: 0.0005)   // long enough that one thread cannot take two turns unseen
                tally.record(i)
            }
            let (counts, threads) = tally.snapshot
            #expect(counts == Dictionary(uniqueKeysWithValues: (0 ..< participants).map { ($0, 1) }))
            #expect(threads == participants)
        }
    }

    @Test func run_insideARegionRunsSeriallyInsteadOfDeadlocking() {
        let pool = WorkerPool(width: 2)
        defer { pool.shutDown() }
        let outer = Tally(), inner = Tally()
        pool.run(participants: 2) { i in
            outer.record(i)
            pool.run(participants: 2) { j in inner.record(10 * i + j) }
        }
        #expect(outer.snapshot.counts == [0: 1, 1: 1])
        #expect(inner.snapshot.counts == [0: 1, 1: 1, 10: 1, 11: 1])
    }

    @Test func run_fromManyThreadsAtOnceCompletesEveryRegion() async {
        let pool = WorkerPool(width: 3)
        defer { pool.shutDown() }
        final class Total: Sendable { let value = Atomic<Int>(0) }
        let total = Total()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0 ..< 8 {
                group.addTask {
                    for _ in 0 ..< 200 { pool.run(participants: 3) { i in total.value.add(i + 1, ordering: .relaxed) } }
                }
            }
        }
        #expect(total.value.load(ordering: .relaxed) == 8 * 200 * (1 + 2 + 3))
    }

    @Test func run_wakesHelpersThatParkedAfterTheSpinWindow() {
        let pool = WorkerPool(width: 2)
        defer { pool.shutDown() }
        for _ in 0 ..< 3 {
            Thread.sleep(forTimeInterval: 0.02)   // ten spin windows: the helper is parked
            let tally = Tally()
            pool.run(participants: 2) { tally.record($0) }
            #expect(tally.snapshot.counts == [0: 1, 1: 1])
            #expect(tally.snapshot.threads == 2)
        }
    }

    @Test func shutDown_endsHelpersAndLaterRegionsRunOnTheCaller() {
        let pool = WorkerPool(width: 3)
        pool.shutDown()
        let tally = Tally()
        pool.run(participants: 3) { tally.record($0) }
        #expect(tally.snapshot.counts == [0: 1, 1: 1, 2: 1])
        #expect(tally.snapshot.threads == 1)
    }
}
