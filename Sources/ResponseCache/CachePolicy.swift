import Crypto
import Foundation

/// How a request uses the cache. One enum, one call site: ``ResponseCache/responses(for:policy:generate:)``.
public enum CachePolicy: String, Sendable, CaseIterable {
    /// Cache-aside: a valid cached value, else generate and store.
    case cacheElseGenerate
    /// Stale-while-revalidate: the cached value now (if any), then a fresh one.
    case cacheThenGenerate
    /// Always generate and store (a refresh).
    case generateIgnoringCache
    /// Never generate: a miss is a ``CacheAnswer`` with origin ``CacheAnswer/Origin/none``.
    case cacheOnly
}
