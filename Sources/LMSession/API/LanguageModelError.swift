import LMRuntime

/// Errors a session request can throw. Each carries the numbers needed to act on it.
///
/// This is the error the session throws (the shape of FoundationModels' iOS 27
/// `LanguageModelError`). Code written against iOS 26's
/// ``LanguageModelSession/GenerationError`` compiles too, and ``generationError`` gives
/// the iOS 26 form of any of these errors for code that switches over it.
public enum LanguageModelError: Error, Equatable, CustomStringConvertible {
    /// The request does not fit the context window.
    case contextSizeExceeded(ContextSizeExceeded)
    /// Another request is already running on this session.
    case concurrentRequests
    /// An option outside its range, by name, with what it may be.
    case invalidOptions(option: String, reason: String)
    /// A tool the model called is not offered, or its call could not be read.
    case toolCallFailed(toolName: String, reason: String)
    /// The runtime refused the request (a token outside the vocabulary, an allocation that failed, ...).
    case runtime(RuntimeError)
    /// The model could not be loaded (missing or invalid files, too big for the memory limit);
    /// ``SystemLanguageModel/availability`` reports the same before any request.
    case modelUnavailable(ModelLoadError)
    /// A guided-generation schema the constrained decoder cannot follow.
    case unsupportedSchema(GenerationSchema.SchemaError)
    /// Generated content could not be read as the requested type (a conversion the type's
    /// own initializer refused; the decoder itself never produces malformed content).
    case decodingFailure(GeneratedContentError)

    /// The numbers behind a ``contextSizeExceeded(_:)`` error.
    public struct ContextSizeExceeded: Sendable, Equatable, CustomDebugStringConvertible {
        /// The model's context window, in tokens.
        public var contextSize: Int
        /// Tokens the request needs: its rendered prompt plus the response budget (or,
        /// for a response cut off mid-way, the tokens it reached).
        public var tokenCount: Int
        /// Tokens of the rendered request (instructions, tools, history, prompt).
        public var promptTokenCount: Int
        /// The response budget that was reserved.
        public var responseBudget: Int

        /// What happened, with the numbers.
        public var debugDescription: String {
            "the request needs \(tokenCount) tokens (\(promptTokenCount) of prompt + \(responseBudget) of response budget) but the context holds \(contextSize)"
        }
    }

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case let .contextSizeExceeded(e): e.debugDescription
        case .concurrentRequests: "a request is already running on this session"
        case let .invalidOptions(option, reason): "invalid generation option \(option): \(reason)"
        case let .toolCallFailed(name, reason): "tool call to '\(name)' failed: \(reason)"
        case let .runtime(error): "the model refused the request: \(error)"
        case let .modelUnavailable(error): "the model is unavailable: \(error)"
        case let .unsupportedSchema(error): "unsupported schema: \(error)"
        case let .decodingFailure(error): "the response could not be read as the requested type: \(error)"
        }
    }

    /// The same error in iOS 26's ``LanguageModelSession/GenerationError`` shape.
    public var generationError: LanguageModelSession.GenerationError {
        let context = LanguageModelSession.GenerationError.Context(debugDescription: description)
        switch self {
        case .contextSizeExceeded: return .exceededContextWindowSize(context)
        case .concurrentRequests: return .concurrentRequests(context)
        case .modelUnavailable: return .assetsUnavailable(context)
        case .unsupportedSchema: return .unsupportedGuide(context)
        case .decodingFailure, .invalidOptions, .toolCallFailed, .runtime: return .decodingFailure(context)
        }
    }
}
