import Crypto
import Foundation

/// One answer from the cache: a value and where it came from.
public struct CacheAnswer<Value: Sendable>: Sendable {
    /// Where the value came from.
    public enum Origin: String, Sendable, Equatable {
        /// The in-memory tier.
        case memory
        /// The disk tier (now promoted to memory).
        case disk
        /// A generation that just ran.
        case generated
        /// Nothing: a miss under ``CachePolicy/cacheOnly``.
        case none
    }

    /// The value (`nil` only for a ``Origin/none`` miss).
    public var value: Value?
    /// Where it came from.
    public var origin: Origin
    /// The value is past its stale threshold; a refresh was started (or is the next answer).
    public var isStale: Bool
    /// A refresh that failed while this cached value was served ("showing cached data").
    public var refreshError: String?
    /// When the value was generated.
    public var generatedAt: Date?

    /// Whether the value came from a tier rather than a generation.
    public var isCached: Bool { origin == .memory || origin == .disk }
}
