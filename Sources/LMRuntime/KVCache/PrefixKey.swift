import Crypto

/// Names a prefix of token ids on one model: SHA-256 over the model's fingerprint, then the
/// ids (32-bit little-endian), so the key of `tokens[0..<n]` depends on every token before
/// `n` and on the weights, as the K/V rows it names do. Never `Hasher` (seeded per process).
public struct PrefixKey: Hashable, Sendable, CustomStringConvertible {
    /// The 32 digest bytes.
    public let bytes: [UInt8]

    /// A key from its 32 bytes (as read from a file header).
    init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// Lowercase hex: the file name of the key's entry on disk (no prompt text ever is).
    public var description: String {
        let digits = Array("0123456789abcdef".utf8)   // (String(format:) per byte cost ~100 µs per key on Linux)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }

    /// The keys of `tokens[0..<b]` for each `b` in `boundaries` (ascending, each `≤ tokens.count`),
    /// in one pass over the tokens.
    /// - Complexity: O(max boundary).
    package static func keys(fingerprint: ModelFingerprint, tokens: [Int], at boundaries: [Int]) -> [PrefixKey] {
        var hash = SHA256()
        hash.update(data: fingerprint.bytes)
        var keys: [PrefixKey] = []
        var hashed = 0
        var chunk: [UInt8] = []
        for boundary in boundaries {
            precondition(boundary >= hashed && boundary <= tokens.count, "boundaries must ascend within the tokens")
            chunk.removeAll(keepingCapacity: true)
            chunk.reserveCapacity(4 * (boundary - hashed))
            for token in tokens[hashed ..< boundary] {
                withUnsafeBytes(of: UInt32(truncatingIfNeeded: token).littleEndian) { chunk.append(contentsOf: $0) }
            }
            hash.update(data: chunk)
            hashed = boundary
            keys.append(PrefixKey(bytes: Array(hash.finalize()))!)   // a copy finalises; `hash` keeps going
        }
        return keys
    }

    /// The key of the prefix whose ids are `tokenIDs`, given as a file stores them (32-bit
    /// little-endian each): the same key as ``keys(fingerprint:tokens:at:)`` gives those ids.
    package static func key(fingerprint: ModelFingerprint, littleEndianTokenIDs tokenIDs: [UInt8]) -> PrefixKey {
        var hash = SHA256()
        hash.update(data: fingerprint.bytes)
        hash.update(data: tokenIDs)
        return PrefixKey(bytes: Array(hash.finalize()))!   // SHA-256 digests are 32 bytes
    }
}
