import Foundation

extension SystemLanguageModel.Adapter {
    /// Why an adapter could not be found or read (FoundationModels' shape).
    public enum AssetError: Error, LocalizedError, Sendable, CustomStringConvertible {
        /// The adapter file is malformed (the context names the key or tensor).
        case invalidAsset(Context)
        /// The adapter name is not letters, digits and underscores.
        case invalidAdapterName(Context)
        /// No adapter with that name was made for the model.
        case compatibleAdapterNotFound(Context)

        /// What happened.
        public struct Context: Sendable {
            /// A sentence for developers.
            public let debugDescription: String

            /// A context.
            public init(debugDescription: String) { self.debugDescription = debugDescription }
        }

        /// A sentence naming the problem.
        public var description: String {
            switch self {
            case let .invalidAsset(c): "invalid adapter: \(c.debugDescription)"
            case let .invalidAdapterName(c): "invalid adapter name: \(c.debugDescription)"
            case let .compatibleAdapterNotFound(c): "no compatible adapter: \(c.debugDescription)"
            }
        }

        /// The same sentence, for `localizedDescription`.
        public var errorDescription: String? { description }

        /// What to do about it.
        public var recoverySuggestion: String? {
            switch self {
            case .invalidAsset: "Write the adapter again (kvbench adapter) or check the file named above."
            case .invalidAdapterName: "Use the name the adapter's files carry: fmadapter-<name>-<version>.gguf."
            case .compatibleAdapterNotFound: "Make the adapter for this model's weights; their fingerprint is SystemLanguageModel.baseFingerprint()."
            }
        }
    }
}
