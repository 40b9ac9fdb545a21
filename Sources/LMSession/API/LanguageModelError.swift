import Foundation
import LMRuntime

/// A request failed while the model worked on it. Each case carries the numbers needed to act on it.
///
/// FoundationModels' iOS 27 shape: the nine cases its `LanguageModelError` has, each with its
/// information type (`debugDescription`, `metadata` and the case's own fields), and four of this
/// package's own after them. Misuse of a session throws ``LanguageModelSession/Error`` instead
/// (two requests at once, a transcript replaced mid-request), a model that cannot load throws
/// ``SystemLanguageModel/Error``, and a tool that throws stops the request with
/// ``LanguageModelSession/ToolCallError``. Code written against iOS 26's
/// ``LanguageModelSession/GenerationError`` compiles too: ``generationError`` gives the iOS 26
/// form of any of these for code that switches over it.
///
/// The local models never refuse, rate-limit, time out, run guardrails or detect languages, so
/// `rateLimited`, `refusal`, `timeout`, `guardrailViolation`, `unsupportedTranscriptContent`
/// and `unsupportedLanguageOrLocale` exist for source compatibility and are never thrown here.
/// Equality ignores every case's `metadata`.
public enum LanguageModelError: Error, Equatable, CustomStringConvertible, LocalizedError {
    /// The request does not fit the context window.
    case contextSizeExceeded(ContextSizeExceeded)
    /// Too many requests (never thrown here).
    case rateLimited(RateLimited)
    /// The model declined to respond (never thrown here).
    case refusal(Refusal)
    /// The request took too long (never thrown here).
    case timeout(Timeout)
    /// Guardrails stopped the request (never thrown here: the local models have none).
    case guardrailViolation(GuardrailViolation)
    /// The request needs something the model cannot do: guided generation or tool calling on a
    /// model whose ``LanguageModel/capabilities`` lack it.
    case unsupportedCapability(UnsupportedCapability)
    /// The transcript holds content the model cannot take (never thrown here).
    case unsupportedTranscriptContent(UnsupportedTranscriptContent)
    /// A schema or guide the constrained decoder cannot follow (see its `schemaError`).
    case unsupportedGenerationGuide(UnsupportedGenerationGuide)
    /// The prompt's language is not supported (never thrown here).
    case unsupportedLanguageOrLocale(UnsupportedLanguageOrLocale)

    /// A generation option is out of range, or options contradict each other.
    case invalidOptions(option: String, reason: String)
    /// The model produced a tool call the session could not run (unknown tool, arguments
    /// that are not JSON).
    case toolCallFailed(toolName: String, reason: String)
    /// The runtime refused the request (a token outside the vocabulary, a full KV cache).
    case runtime(RuntimeError)
    /// Generated content could not be read as the requested type (a conversion the type's
    /// own initializer refused; the decoder itself never produces malformed content).
    case decodingFailure(GeneratedContentError)

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case let .contextSizeExceeded(e): e.debugDescription
        case let .rateLimited(e): "rate limited: \(e.debugDescription)"
        case let .refusal(e): "the model refused: \(e.debugDescription)"
        case let .timeout(e): "timed out: \(e.debugDescription)"
        case let .guardrailViolation(e): "guardrail violation: \(e.debugDescription)"
        case let .unsupportedCapability(e): e.debugDescription
        case let .unsupportedTranscriptContent(e): "unsupported transcript content: \(e.debugDescription)"
        case let .unsupportedGenerationGuide(e): "unsupported schema: \(e.debugDescription)"
        case let .unsupportedLanguageOrLocale(e): "unsupported language: \(e.debugDescription)"
        case let .invalidOptions(option, reason): "invalid generation option \(option): \(reason)"
        case let .toolCallFailed(name, reason): "tool call to '\(name)' failed: \(reason)"
        case let .runtime(error): "the model refused the request: \(error)"
        case let .decodingFailure(error): "the response could not be read as the requested type: \(error)"
        }
    }

    /// The same sentence, for `localizedDescription`.
    public var errorDescription: String? { description }

    /// The same error in iOS 26's ``LanguageModelSession/GenerationError`` shape.
    public var generationError: LanguageModelSession.GenerationError {
        let context = LanguageModelSession.GenerationError.Context(debugDescription: description)
        switch self {
        case .contextSizeExceeded: return .exceededContextWindowSize(context)
        case .rateLimited: return .rateLimited(context)
        case let .refusal(refusal): return .refusal(refusal.generationRefusal, context)
        case .guardrailViolation: return .guardrailViolation(context)
        case .unsupportedLanguageOrLocale: return .unsupportedLanguageOrLocale(context)
        case .unsupportedGenerationGuide: return .unsupportedGuide(context)
        case let .unsupportedCapability(e) where e.capability == .guidedGeneration: return .unsupportedGuide(context)
        case .unsupportedCapability, .unsupportedTranscriptContent, .timeout, .decodingFailure, .invalidOptions,
             .toolCallFailed, .runtime:
            return .decodingFailure(context)
        }
    }
}
