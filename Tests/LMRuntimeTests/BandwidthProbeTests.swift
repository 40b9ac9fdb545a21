import CKernels
import LMRuntime
import Testing

/// The probes `kvbench kernels` times for the machine's ceilings: whatever their speed, each
/// must read every element it claims to (a probe that skipped some would report a ceiling the
/// machine does not have).
struct BandwidthProbeTests {
    /// Small integers as halfs: every partial sum is exact in float, in any order.
    static func integerHalfs(_ n: Int) -> [UInt16] { (0 ..< n).map { Kernels.halfBits(Float($0 % 13) - 6) } }

    typealias SumHalfs = @Sendable (UnsafePointer<UInt16>, Int) -> Float

    @Test(arguments: [("dispatched", kv_sum_halfs as SumHalfs), ("portable", kv_sum_halfs_portable as SumHalfs)])
    func sumHalfs_addsEveryConvertedHalf(name: String, body: SumHalfs) {
        for n in [0, 1, 7, 8, 63, 64, 65, 200, 4_099] {
            let halfs = Self.integerHalfs(n)
            let exact = halfs.map { Kernels.float(fromHalf: $0) }.reduce(0, +)
            #expect(halfs.withUnsafeBufferPointer { body($0.baseAddress!, n) } == exact, "\(name) n=\(n)")
        }
    }

    @Test func repeatedHalfSums_isEachWorkersPassesOverTheHalfs() {
        let halfs = Self.integerHalfs(1_000)
        let once = halfs.map { Kernels.float(fromHalf: $0) }.reduce(0, +)
        #expect(once != 0)
        for workers in 1 ... Kernels.workerCount {
            let total = halfs.withUnsafeBufferPointer {
                Kernels.repeatedHalfSums($0.baseAddress!, count: $0.count, passes: 3, workers: workers)
            }
            #expect(total == Float(3 * workers) * once, "\(workers) workers")
        }
    }

    /// Every stream count (and counts outside 1...8, clamped) reads every element once: small
    /// integers, so any order of additions gives the exact sum; the bands' lengths leave parts that
    /// are not whole steps and a rest after the streams.
    @Test func streamingSum_readsEveryElementOnceInAnyNumberOfStreams() {
        let values = (0 ..< 37 * 48).map { Float($0 % 11) - 5 }, exact = values.reduce(0, +)
        let m = Matrix(rows: 37, cols: 48, values: values)
        for workers in 1 ... Kernels.workerCount {
            #expect(Kernels.streamingSum(m, workers: workers) == exact, "\(workers) workers")
            for streams in 0 ... 9 {
                #expect(Kernels.streamingSum(m, workers: workers, streams: streams) == exact, "\(workers) workers, \(streams) streams")
            }
        }
    }

    /// The compute probe multiplies every band (its rates would claim work it skipped otherwise) and
    /// reports one positive rate a worker.
    @Test func bandedSGEMMRates_computesEveryBandOfTheProduct() {
        let a = Matrix(rows: 9, cols: 20, values: (0 ..< 180).map { Float($0 % 7) - 3 })
        let b = Matrix(rows: 13, cols: 20, values: (0 ..< 260).map { Float($0 % 5) - 2 })
        for workers in 1 ... Kernels.workerCount {
            let c = Matrix(rows: 9, cols: 13, values: Array(repeating: .nan, count: 117))
            let rates = Kernels.bandedSGEMMRates(a, transposed: b, into: c, workers: workers)
            #expect(rates.count == workers && rates.allSatisfy { $0 > 0 && $0.isFinite }, "\(workers) workers: \(rates)")
            for i in 0 ..< 9 {
                for j in 0 ..< 13 {   // small integers: exact in any order
                    let dot = (0 ..< 20).reduce(Float(0)) { $0 + a[i, $1] * b[j, $1] }
                    #expect(c[i, j] == dot, "\(workers) workers, row \(i), column \(j)")
                }
            }
        }
    }
}
