/// Why a ``PrefixStore`` setting cannot be used.
public enum PrefixStoreError: Error, Equatable, CustomStringConvertible {
    /// An encryption key must be 32 bytes (AES-256).
    case invalidEncryptionKey(byteCount: Int)
    /// The disk tier's directory cannot be created or written; the store stays memory-only.
    case directoryUnusable(path: String, reason: String)

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case let .invalidEncryptionKey(count): "an encryption key must be 32 bytes, got \(count)"
        case let .directoryUnusable(path, reason): "the prefix store cannot use the directory \(path): \(reason)"
        }
    }
}
