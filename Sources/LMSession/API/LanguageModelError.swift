/// Errors a session request can throw. Each carries the numbers needed to act on it.
public enum LanguageModelError: Error, Equatable, CustomStringConvertible {
    /// The request does not fit the context window.
    case contextSizeExceeded(ContextSizeExceeded)
    /// Another request is already running on this session.
    case concurrentRequests
    /// Options outside their ranges (the message names the option).
    case invalidOptions(String)
    /// A tool the model called is not offered, or threw.
    case toolCallFailed(toolName: String, reason: String)
    /// The runtime refused the request (a token outside the vocabulary, ...).
    case runtime(String)
    /// A guided-generation schema the constrained decoder cannot follow.
    case unsupportedSchema(GenerationSchema.SchemaError)
    /// Generated content could not be read as the requested type (a conversion the type's
    /// own initializer refused; the decoder itself never produces malformed content).
    case decodingFailure(GeneratedContentError)

    /// The numbers behind a ``contextSizeExceeded(_:)`` error.
    public struct ContextSizeExceeded: Sendable, Equatable {
        /// The model's context window, in tokens.
        public var contextSize: Int
        /// Tokens the request needs: its rendered prompt plus the response budget (or,
        /// for a response cut off mid-way, the tokens it reached).
        public var tokenCount: Int
        /// Tokens of the rendered request (instructions, tools, history, prompt).
        public var promptTokenCount: Int
        /// The response budget that was reserved.
        public var responseBudget: Int
    }

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case let .contextSizeExceeded(e):
            "the request needs \(e.tokenCount) tokens (\(e.promptTokenCount) of prompt + \(e.responseBudget) of response budget) but the context holds \(e.contextSize)"
        case .concurrentRequests: "a request is already running on this session"
        case let .invalidOptions(message): "invalid generation options: \(message)"
        case let .toolCallFailed(name, reason): "tool call to '\(name)' failed: \(reason)"
        case let .runtime(message): "the model refused the request: \(message)"
        case let .unsupportedSchema(error): "unsupported schema: \(error)"
        case let .decodingFailure(error): "the response could not be read as the requested type: \(error)"
        }
    }
}
