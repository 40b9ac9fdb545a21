import CKernels
import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Bands that a thread finished early can take over from a slower one (`Kernels.balancedBands`):
/// the claims on a band never overlap and leave nothing out, the owner's claims stay one forward
/// run, and projections cut wherever the claims fell give the bits of one uncut call.
struct BalancedBandsTests {
    /// Ranges run by each thread, recorded from inside a region.
    final class Runs: @unchecked Sendable {
        private let lock = NSLock()
        private var runs: [(thread: Int, range: Range<Int>)] = []

        func record(_ thread: Int, _ range: Range<Int>) { lock.withLock { runs.append((thread, range)) } }

        var all: [(thread: Int, range: Range<Int>)] { lock.withLock { runs } }

        /// Holds thread 1 on its first call until thread 0 has run something from `start` on (at
        /// most two seconds): thread 1 has then claimed half its band and stalls on it.
        func stall(_ thread: Int, until start: Int) {
            guard thread == 1, !all.contains(where: { $0.thread == 1 }) else { return }
            let deadline = Date().addingTimeInterval(2)
            while !all.contains(where: { $0.thread == 0 && $0.range.lowerBound >= start }), Date() < deadline {
                Thread.sleep(forTimeInterval: 0.001)
            }
        }
    }

    /// Where thread 1's band starts: the bands split the chunks of `alignment` items evenly.
    static func secondBandStart(_ count: Int, minimumPerBand: Int, alignment: Int) -> Int {
        let bands = min(Kernels.workerCount, count / minimumPerBand), chunks = (count + alignment - 1) / alignment
        return chunks / bands * alignment
    }

    /// Any interleaving of the owner's and a thief's claims: each takes half of what is left (at
    /// least one chunk), the owner's claims run on from the front, the thief's back from the end, and
    /// together they cover the band once.
    @Test func claims_takeHalfOfWhatIsLeftAndCoverTheBandOnce() {
        var generator = SeededGenerator(seed: 17)
        for chunks in [1, 2, 3, 7, 64, 1000] {
            for _ in 0 ..< 20 {
                var word: UInt64 = 0
                kv_band_reset(&word, Int64(chunks))
                var front = 0, back = chunks, covered = [Int](repeating: 0, count: chunks)
                while true {
                    let fromBack = Bool.random(using: &generator), left = back - front
                    var count: Int64 = 0
                    let first = fromBack ? kv_band_claim_back(&word, &count) : kv_band_claim_front(&word, &count)
                    guard first >= 0 else { break }
                    #expect(Int(count) == max(1, left / 2), "\(chunks) chunks, \(left) left")
                    #expect(Int(first) == (fromBack ? back - Int(count) : front))
                    for c in Int(first) ..< Int(first + count) { covered[c] += 1 }
                    if fromBack { back -= Int(count) } else { front += Int(count) }
                }
                #expect(front == back, "claims stopped with \(back - front) chunks left")
                #expect(covered.allSatisfy { $0 == 1 }, "\(chunks) chunks: \(covered.filter { $0 != 1 }.count) not covered once")
                var count: Int64 = 0
                #expect(kv_band_claim_front(&word, &count) == -1 && kv_band_claim_back(&word, &count) == -1)
            }
        }
    }

    /// A thread that stalls after its first claim has the unclaimed rest of its band taken over;
    /// every item still runs once and every cut falls on the alignment. (When another test holds the pool the region runs serially and the
    /// first participant takes over everything: the same checks hold.)
    @Test(.enabled(if: Kernels.workerCount > 1, "one core: nothing is split"), arguments: [(1000, 16), (4096, 16), (100, 4)])
    func balancedBands_coversEveryItemOnceAndTakesOverAStalledBand(count: Int, alignment: Int) {
        let runs = Runs(), secondBand = Self.secondBandStart(count, minimumPerBand: alignment, alignment: alignment)
        Kernels.balancedBands(count, minimumPerBand: alignment, alignment: alignment) { thread, range, following in
            runs.stall(thread, until: secondBand)
            runs.record(thread, range)
            // What follows a range is the rest of its own band (an owner's claims), or nothing.
            let bandEnd = range.lowerBound < secondBand && Kernels.workerCount == 2 ? secondBand : count
            #expect(following == 0 || range.upperBound + following <= bandEnd, "\(range) followed by \(following)")
        }
        let all = runs.all
        var covered = [Int](repeating: 0, count: count)
        for run in all {
            #expect(run.range.lowerBound % alignment == 0 && !run.range.isEmpty, "\(run.range)")
            for i in run.range { covered[i] += 1 }
        }
        #expect(covered.allSatisfy { $0 == 1 }, "\(covered.filter { $0 != 1 }.count) items not run once")
        #expect(all.contains { $0.thread == 0 && $0.range.lowerBound >= secondBand }, "nothing of the stalled band taken over")
    }

    /// The skinny projections wherever the claims cut them (a stalled thread, so the other takes
    /// over part of its band mid-way) give one uncut call's bits: float32 and half weights, packed,
    /// decode and short prefills, halfs converted in registers and in chunks.
    @Test(.enabled(if: Kernels.workerCount > 1, "one core: nothing is split"),
          arguments: [WeightPrecision.f32, .f16], [1, 4, 8, 13])
    func balancedBands_projectionsAreTheBitsOfOneCall(precision: WeightPrecision, rows: Int) {
        let outputs = 1000, k = 72
        let a = Matrix(rows: rows, cols: k, values: CKernelsTests.values(rows * k, seed: 3, scale: 1))
        let f32 = Matrix(rows: outputs, cols: k, values: CKernelsTests.values(outputs * k, seed: 4, scale: 1))
        let w = Kernels.pack(precision == .f16 ? WeightMatrix.half(copying: f32) : WeightMatrix(f32))
        let scratch = HalfScratch(width: k)
        let expected = Matrix.zeros(rows: rows, cols: outputs), c = Matrix.zeros(rows: rows, cols: outputs)
        Kernels.singleThreadMatmul(a, transposed: w, into: expected, alpha: 1, beta: 0, block: scratch.block(0))
        let runs = Runs(), secondBand = Self.secondBandStart(outputs, minimumPerBand: 16, alignment: 16)
        Kernels.balancedBands(outputs, minimumPerBand: 16, alignment: 16) { thread, range, following in
            runs.stall(thread, until: secondBand)
            runs.record(thread, range)
            Kernels.singleThreadMatmul(a, transposed: w.rows(range), into: c.columns(range), alpha: 1, beta: 0,
                                       block: scratch.block(thread), following: min(following, Kernels.prefetchedRows))
        }
        #expect(runs.all.contains { $0.thread == 0 && $0.range.lowerBound >= secondBand }, "nothing of the stalled band taken over")
        #expect(zip(c.toArray(), expected.toArray()).filter { $0.bitPattern != $1.bitPattern }.isEmpty)
    }
}
