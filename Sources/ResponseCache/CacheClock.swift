import Foundation
import Synchronization

/// The time source for TTL, stale thresholds and retention (injected in tests).
public protocol CacheClock: Sendable {
    /// The current time.
    var now: Date { get }
}
