import Dispatch
import Foundation

extension Kernels {
    /// Cores the non-BLAS kernels split their work over.
    public static let workerCount = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// Runs `body` over `0..<count` split into at most ``workerCount`` contiguous bands,
    /// in parallel when each band gets at least `minimumPerBand` items.
    static func parallelBands(_ count: Int, minimumPerBand: Int, _ body: @Sendable (Range<Int>) -> Void) {
        let bands = max(1, min(workerCount, count / max(1, minimumPerBand)))
        guard bands > 1 else { body(0 ..< count); return }
        DispatchQueue.concurrentPerform(iterations: bands) { band in
            body(count * band / bands ..< count * (band + 1) / bands)
        }
    }

    /// Runs `body(worker)` on each of `workers` threads while OpenBLAS is held to one
    /// thread, so BLAS calls inside do not oversubscribe the cores.
    static func parallelWorkers(_ workers: Int, _ body: @Sendable (Int) -> Void) {
        guard workers > 1 else { body(0); return }
        let saved = blasThreadCount
        setBLASThreadCount(1)
        DispatchQueue.concurrentPerform(iterations: workers, execute: body)
        setBLASThreadCount(saved)
    }
}
