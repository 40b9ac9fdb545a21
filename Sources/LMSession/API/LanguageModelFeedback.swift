/// Feedback on a session's responses, in FoundationModels' shape: a sentiment and issues from a
/// fixed list, serialized with the session's transcript by
/// ``LanguageModelSession/logFeedbackAttachment(sentiment:issues:desiredOutput:)``.
public struct LanguageModelFeedback: Sendable {
    /// How the response was received.
    public enum Sentiment: String, Sendable, Hashable, Codable, CaseIterable {
        /// The response was good.
        case positive
        /// The response was bad.
        case negative
        /// Neither.
        case neutral
    }

    /// One thing wrong with a response.
    public struct Issue: Sendable, Hashable, Codable {
        /// What kind of problem it is.
        public enum Category: String, Sendable, Hashable, Codable, CaseIterable {
            /// The response ignored an instruction (the steps were asked for numbered and are not).
            case didNotFollowInstructions
            /// The response is wrong.
            case incorrect
            /// The response shows bias or a stereotype.
            case stereotypeOrBias
            /// The response is suggestive or sexual.
            case suggestiveOrSexual
            /// The response is longer than it needs to be.
            case tooVerbose
            /// Guardrails stopped a harmless request.
            case triggeredGuardrailUnexpectedly
            /// The response does not help (ingredients without amounts).
            case unhelpful
            /// The response is vulgar or offensive.
            case vulgarOrOffensive
        }

        /// The issue's category.
        public var category: Category
        /// Why, in the user's words.
        public var explanation: String?

        /// An issue.
        public init(category: Category, explanation: String? = nil) {
            self.category = category
            self.explanation = explanation
        }
    }
}
