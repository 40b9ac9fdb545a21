import Foundation
import Synchronization

/// A clock that moves only when told to: TTL and retention tests without sleeping.
public final class ManualCacheClock: CacheClock {
    private let current: Mutex<Date>
    /// A clock at `start`.
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(start) }
    /// The clock's time.
    public var now: Date { current.withLock { $0 } }
    /// Moves the clock forward, or back for a negative `seconds` (as a system clock set back does).
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}
