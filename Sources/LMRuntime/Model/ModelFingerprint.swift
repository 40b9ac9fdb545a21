import Crypto
import Foundation

/// What identifies a model's weights for cached K/V: SHA-256 over its config and a sample of
/// its weights. K/V rows computed on one model are never valid on another, so every
/// ``PrefixKey`` and every file of the prefix store's disk tier carries it.
///
/// Why a sample and not every byte: hashing all of `base`'s 412 MB takes about 0.26 s
/// (SHA-256 at ~1.6 GB/s), paid again at every launch before the first cache hit from disk,
/// which alone would exceed the relaunch latency the store exists to save. The config (every
/// dimension, the weight source and seed; the context length the model declares, not a shorter
/// one it was loaded with, since K/V rows do not depend on it), the total size, and 65,536 floats spread evenly
/// over the buffer (every tensor is sampled; read as plain rows, so packing for streaming does not
/// change it) tell apart any two models that are not
/// byte-identical in all but a vanishing fraction of unsampled weights.
public struct ModelFingerprint: Hashable, Sendable, CustomStringConvertible {
    /// The 32 digest bytes.
    public let bytes: [UInt8]

    /// Floats of the weights that enter the digest.
    static let sampleCount = 65_536

    /// The fingerprint of `weights`.
    /// - Complexity: O(``sampleCount``), about a millisecond.
    public init(_ weights: ModelWeights) {
        var hash = SHA256()
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // A config always encodes (plain values); an empty string would still be hashed consistently.
        // A limited context changes no value the model computes, so the declared one is hashed.
        hash.update(data: (try? encoder.encode(weights.config.declared)) ?? Data())
        let floats = weights.storage
        let count = UInt64(floats.count)
        hash.update(data: (0 ..< 8).map { UInt8(truncatingIfNeeded: count >> (8 * $0)) })
        let samples = min(floats.count, Self.sampleCount)
        var sample = [UInt8]()
        sample.reserveCapacity(4 * samples)
        for i in 0 ..< samples {
            let bits = weights.plainBits(at: i * floats.count / samples, inFloats: true)
            for shift in stride(from: 0, to: 32, by: 8) { sample.append(UInt8(truncatingIfNeeded: bits >> shift)) }
        }
        hash.update(data: sample)
        // Half-precision matrices live in their own buffer (the float one then holds the norms).
        if let halfs = weights.halfStorage {
            let halfSamples = min(halfs.count, Self.sampleCount)
            hash.update(data: (0 ..< 8).map { UInt8(truncatingIfNeeded: UInt64(halfs.count) >> (8 * $0)) })
            hash.update(data: (0 ..< halfSamples).flatMap { i -> [UInt8] in
                let bits = UInt16(weights.plainBits(at: i * halfs.count / halfSamples, inFloats: false))
                return [UInt8(truncatingIfNeeded: bits), UInt8(truncatingIfNeeded: bits >> 8)]
            })
        }
        // Attention biases (Qwen2) live beside the buffers; few enough to hash whole.
        for layer in weights.layers {
            guard let bias = layer.qkvBias else { continue }
            hash.update(data: bias.toArray().flatMap { value in (0 ..< 4).map { UInt8(truncatingIfNeeded: value.bitPattern >> (8 * $0)) } })
        }
        bytes = Array(hash.finalize())
    }

    /// A fingerprint from its 32 bytes (as read from a file header).
    init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// A fingerprint from its lowercase or uppercase hex (``description``); `nil` unless 64 hex digits.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        for i in stride(from: 0, to: 64, by: 2) {
            guard let byte = UInt8(String(decoding: digits[i ..< i + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        self.bytes = bytes
    }

    /// Lowercase hex.
    public var description: String { bytes.map { String(format: "%02x", $0) }.joined() }
}
