import Foundation
import Synchronization

/// Counters a cache keeps.
public struct CacheMetrics: Sendable, Equatable {
    /// Answers served from memory.
    public var memoryHits = 0
    /// Answers served from disk.
    public var diskHits = 0
    /// Lookups that found nothing valid.
    public var misses = 0
    /// Cached answers served past their stale threshold.
    public var staleServed = 0
    /// Generations run (first fills and refreshes).
    public var generations = 0
    /// Generations that ran to replace a cached value.
    public var refreshes = 0
    /// Generations whose result was not stored because an invalidation matching their key
    /// landed while they ran.
    public var discardedGenerations = 0
    /// Entries evicted from either tier by the LRU limits or the retention sweep.
    public var evictions = 0
    /// Entry files found unreadable or corrupt (each removed and counted as a miss).
    public var corruptEntries = 0
    /// Bytes the disk tier holds.
    public var bytesOnDisk = 0
    /// The last disk-tier error (the cache keeps working from memory).
    public var lastDiskError: String?
    /// Generated values not cached because they do not encode as JSON (a non-finite number, a
    /// value whose `encode(to:)` throws); their callers got them, and the tiers kept what they had.
    public var unencodableValues = 0
    /// The encoder's error for the last of those.
    public var lastEncodingError: String?
}
