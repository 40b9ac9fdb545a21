import Foundation
import LMRuntime

extension SystemLanguageModel {
    /// The model could not be used (FoundationModels' iOS 27 shape).
    ///
    /// Inside the model's own extensions this name shadows Swift's `Error` protocol: write
    /// `Swift.Error` there.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible, LocalizedError {
        /// The model's files are missing or invalid, or it does not fit the memory limit: the
        /// first request (or ``LanguageModelSession/prewarm(promptPrefix:)``) throws this, and
        /// ``SystemLanguageModel/availability`` reports the same failure up front.
        case assetsUnavailable(AssetsUnavailable)

        /// Why the model's files cannot be used.
        public struct AssetsUnavailable: Sendable, Equatable, CustomDebugStringConvertible {
            /// What happened.
            public var debugDescription: String
            /// The loader's error, typed (`nil` when built with FoundationModels' initializer).
            public var loadError: ModelLoadError?

            /// FoundationModels' initializer.
            public init(debugDescription: String) { self.debugDescription = debugDescription }

            /// The error for a failed load.
            public init(_ error: ModelLoadError) {
                debugDescription = "\(error)"
                loadError = error
            }
        }

        /// A sentence naming the problem.
        public var description: String {
            switch self {
            case let .assetsUnavailable(e): "the model is unavailable: \(e.debugDescription)"
            }
        }

        /// The same sentence, for `localizedDescription`.
        public var errorDescription: String? { description }

        /// The same error in iOS 26's ``LanguageModelSession/GenerationError`` shape.
        public var generationError: LanguageModelSession.GenerationError {
            .assetsUnavailable(.init(debugDescription: description))
        }
    }
}
