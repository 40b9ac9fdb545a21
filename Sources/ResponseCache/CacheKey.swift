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
