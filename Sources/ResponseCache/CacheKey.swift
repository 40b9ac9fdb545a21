import Crypto
import Foundation

/// Identifies a cached value: a SHA-256 over everything the generation depends on, plus
/// the optional data fingerprint and tags used for targeted invalidation.
///
/// Digests are stable across processes and machines (never `Hasher`/`hashValue`). The
/// schema version is hashed in, so bumping it makes every older entry unreachable.
public struct CacheKey: Hashable, Codable, Sendable, CustomStringConvertible {
    /// Lowercase hex SHA-256 of the key's parts.
    public let digest: String
    /// A fingerprint of the input data (ids, a hash), for invalidation when the data changes.
    public let dataFingerprint: String?
    /// Labels for invalidation by group (a date, a category, a user).
    public let tags: Set<String>

    /// A key over `parts` (each hashed with its length, so parts never run together).
    /// - Parameters:
    ///   - parts: everything the generation depends on, e.g. model id, instructions, prompt, options.
    ///   - dataFingerprint: a fingerprint of the input data; it is part of the digest too.
    ///   - tags: invalidation labels (not part of the digest).
    ///   - schemaVersion: the cache's format version.
    public init(parts: [String], dataFingerprint: String? = nil, tags: Set<String> = [], schemaVersion: Int = 1) {
        var hasher = SHA256()
        for part in ["schema:\(schemaVersion)"] + parts + ["data:\(dataFingerprint ?? "")"] {
            let bytes = Array(part.utf8)
            withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { hasher.update(bufferPointer: $0) }
            hasher.update(data: bytes)
        }
        digest = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        self.dataFingerprint = dataFingerprint
        self.tags = tags
    }

    /// The first 12 hex digits.
    public var description: String { String(digest.prefix(12)) }

    /// Keys are equal when their digests are (tags are labels, not identity).
    public static func == (a: CacheKey, b: CacheKey) -> Bool { a.digest == b.digest }
    /// Hashes the digest.
    public func hash(into hasher: inout Hasher) { hasher.combine(digest) }
}

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
