import Foundation
import Synchronization

/// The most memory a model may need to run, checked when its weights are made or loaded (see
/// ``ModelConfig/resourceEstimate(maxBatch:workers:)``): a config or checkpoint header whose
/// weights, scratch and full-context K/V do not fit is refused with the numbers instead of
/// failing, or being killed, half-way through allocating.
public enum MemoryLimit {
    /// The limit in bytes (default ``defaultBytes``); loaders take it unless given another.
    public static var bytes: Int {
        get { storage.load(ordering: .relaxed) }
        set { storage.store(max(0, newValue), ordering: .relaxed) }
    }

    /// Three quarters of physical memory.
    public static let defaultBytes = Int(clamping: ProcessInfo.processInfo.physicalMemory / 4 * 3)

    private static let storage = Atomic<Int>(defaultBytes)
}
