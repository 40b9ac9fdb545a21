import Foundation

// The information each LanguageModelError case carries, in FoundationModels' iOS 27 shapes:
// every one has a `debugDescription` and `metadata` (extra facts keyed by name), and an
// initializer taking them, so that code which builds these errors itself (a test double, a
// wrapper around another model) compiles. Equality ignores `metadata`, whose values are `any
// Sendable`. ``LanguageModelError/Refusal`` lives in a file of its own.

extension LanguageModelError {
    /// The numbers behind a ``contextSizeExceeded(_:)`` error.
    public struct ContextSizeExceeded: Sendable, Equatable, CustomDebugStringConvertible {
        /// The model's context window, in tokens.
        public var contextSize: Int
        /// Tokens the request needs: its rendered prompt plus the response budget (or, for a
        /// response cut off mid-way, the tokens it reached).
        public var tokenCount: Int
        /// Tokens of the rendered request (instructions, tools, history, prompt).
        public var promptTokenCount: Int
        /// The response budget that was reserved.
        public var responseBudget: Int
        /// What happened, with the numbers.
        public var debugDescription: String
        /// Additional information, keyed by name (empty for the errors this package throws).
        public var metadata: [String: any Sendable]

        /// FoundationModels' initializer: `tokenCount` is all prompt, with no response budget.
        public init(contextSize: Int, tokenCount: Int, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.contextSize = contextSize
            self.tokenCount = tokenCount
            promptTokenCount = tokenCount
            responseBudget = 0
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// The error a request throws: its rendered prompt and the budget it reserved.
        init(contextSize: Int, tokenCount: Int, promptTokenCount: Int, responseBudget: Int) {
            self.init(contextSize: contextSize, tokenCount: tokenCount, debugDescription:
                "the request needs \(tokenCount) tokens (\(promptTokenCount) of prompt + \(responseBudget) of response budget) but the context holds \(contextSize)")
            self.promptTokenCount = promptTokenCount
            self.responseBudget = responseBudget
        }

        /// Equal when every field but `metadata` is.
        public static func == (a: Self, b: Self) -> Bool {
            (a.contextSize, a.tokenCount, a.promptTokenCount, a.responseBudget, a.debugDescription)
                == (b.contextSize, b.tokenCount, b.promptTokenCount, b.responseBudget, b.debugDescription)
        }
    }

    /// A rate-limiting event (never thrown here).
    public struct RateLimited: Sendable, Equatable, CustomDebugStringConvertible {
        /// When retrying is likely to succeed, if known.
        public var resetDate: Date?
        /// What happened.
        public var debugDescription: String
        /// Additional information, keyed by name.
        public var metadata: [String: any Sendable]

        /// A rate-limiting event.
        public init(resetDate: Date?, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.resetDate = resetDate
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// Equal when every field but `metadata` is.
        public static func == (a: Self, b: Self) -> Bool { (a.resetDate, a.debugDescription) == (b.resetDate, b.debugDescription) }
    }

    /// A request that took too long (never thrown here).
    public struct Timeout: Sendable, Equatable, CustomDebugStringConvertible {
        /// What happened.
        public var debugDescription: String
        /// Additional information, keyed by name.
        public var metadata: [String: any Sendable]

        /// A timeout.
        public init(debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// Equal when every field but `metadata` is.
        public static func == (a: Self, b: Self) -> Bool { a.debugDescription == b.debugDescription }
    }

    /// Guardrails that stopped a request (never thrown here).
    public struct GuardrailViolation: Sendable, Equatable, CustomDebugStringConvertible {
        /// What happened.
        public var debugDescription: String
        /// Additional information, keyed by name.
        public var metadata: [String: any Sendable]

        /// A guardrail violation.
        public init(debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// Equal when every field but `metadata` is.
        public static func == (a: Self, b: Self) -> Bool { a.debugDescription == b.debugDescription }
    }

    /// A capability the request needs and the model lacks.
    public struct UnsupportedCapability: Sendable, Equatable, CustomDebugStringConvertible {
        /// The capability the model lacks.
        public var capability: LanguageModelCapabilities.Capability
        /// What happened.
        public var debugDescription: String
        /// Additional information, keyed by name.
        public var metadata: [String: any Sendable]

        /// An unsupported capability.
        public init(capability: LanguageModelCapabilities.Capability, debugDescription: String,
                    metadata: [String: any Sendable] = [:]) {
            self.capability = capability
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// Equal when every field but `metadata` is.
        public static func == (a: Self, b: Self) -> Bool {
            (a.capability, a.debugDescription) == (b.capability, b.debugDescription)
        }
    }

    /// Transcript entries the model cannot take (never thrown here).
    public struct UnsupportedTranscriptContent: Sendable, Equatable, CustomDebugStringConvertible {
        /// The entries it cannot take.
        public var unsupportedContent: [Transcript.Entry]
        /// What happened.
        public var debugDescription: String
        /// Additional information, keyed by name.
        public var metadata: [String: any Sendable]

        /// Unsupported transcript content.
        public init(unsupportedContent: [Transcript.Entry], debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.unsupportedContent = unsupportedContent
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// Equal when every field but `metadata` is.
        public static func == (a: Self, b: Self) -> Bool {
            (a.unsupportedContent, a.debugDescription) == (b.unsupportedContent, b.debugDescription)
        }
    }

    /// A schema or guide the constrained decoder cannot follow.
    public struct UnsupportedGenerationGuide: Sendable, Equatable, CustomDebugStringConvertible {
        /// The schema's name (its root type's), when it has one.
        public var schemaName: String?
        /// What the decoder cannot follow, typed (`nil` when built with FoundationModels' initializer).
        public var schemaError: GenerationSchema.SchemaError?
        /// What happened.
        public var debugDescription: String
        /// Additional information, keyed by name.
        public var metadata: [String: any Sendable]

        /// FoundationModels' initializer.
        public init(schemaName: String?, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.schemaName = schemaName
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// The error a request throws for `error` in the schema named `schemaName`.
        public init(schemaName: String?, schemaError error: GenerationSchema.SchemaError) {
            self.init(schemaName: schemaName, debugDescription: "\(error)")
            schemaError = error
        }

        /// Equal when every field but `metadata` is.
        public static func == (a: Self, b: Self) -> Bool {
            (a.schemaName, a.debugDescription) == (b.schemaName, b.debugDescription) && a.schemaError == b.schemaError
        }
    }

    /// A language the model does not support (never thrown here).
    public struct UnsupportedLanguageOrLocale: Sendable, Equatable, CustomDebugStringConvertible {
        /// The language's code.
        public var languageCode: Locale.LanguageCode
        /// What happened.
        public var debugDescription: String
        /// Additional information, keyed by name.
        public var metadata: [String: any Sendable]

        /// An unsupported language.
        public init(languageCode: Locale.LanguageCode, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            self.languageCode = languageCode
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// Equal when every field but `metadata` is.
        public static func == (a: Self, b: Self) -> Bool {
            (a.languageCode, a.debugDescription) == (b.languageCode, b.debugDescription)
        }
    }
}
