extension LanguageModelSession {
    /// FoundationModels' iOS 26 error shape, for code that catches it by name.
    ///
    /// The session throws iOS 27's types (``LanguageModelError``, ``LanguageModelSession/Error``,
    /// ``SystemLanguageModel/Error``), as FoundationModels does for apps built with Xcode 27;
    /// `catch let e as LanguageModelError` (or its cases) is what matches. This type exists so
    /// iOS 26 code compiles, and each of those types' `generationError` converts for code that
    /// switches over it.
    public enum GenerationError: Swift.Error, Equatable, CustomDebugStringConvertible {
        /// What went wrong, as text.
        public struct Context: Sendable, Equatable, CustomDebugStringConvertible {
            /// A description of the failure.
            public let debugDescription: String
            /// A context.
            public init(debugDescription: String) { self.debugDescription = debugDescription }
        }

        /// The request does not fit the context window.
        case exceededContextWindowSize(Context)
        /// The model's files are missing or invalid.
        case assetsUnavailable(Context)
        /// Content was refused by guardrails (never thrown here: there are none).
        case guardrailViolation(Context)
        /// A guide or schema the decoder cannot follow.
        case unsupportedGuide(Context)
        /// The prompt's language is not supported (never thrown here).
        case unsupportedLanguageOrLocale(Context)
        /// The response could not be produced or read as asked.
        case decodingFailure(Context)
        /// Too many requests (never thrown here).
        case rateLimited(Context)
        /// The model declined to respond (never thrown here: the local models never refuse).
        case refusal(Refusal, Context)
        /// Another request is running on the session.
        case concurrentRequests(Context)

        /// The context's description.
        public var debugDescription: String {
            switch self {
            case let .exceededContextWindowSize(c), let .assetsUnavailable(c), let .guardrailViolation(c),
                 let .unsupportedGuide(c), let .unsupportedLanguageOrLocale(c), let .decodingFailure(c),
                 let .rateLimited(c), let .concurrentRequests(c), let .refusal(_, c): c.debugDescription
            }
        }
    }
}
