import Foundation
import Synchronization

/// The system clock.
public struct SystemCacheClock: CacheClock {
    /// A system clock.
    public init() {}
    /// `Date()`.
    public var now: Date { Date() }
}
