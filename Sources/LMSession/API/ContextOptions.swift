/// How a request is put to the model, beside how its tokens are sampled (``GenerationOptions``).
///
/// FoundationModels' iOS 27 shape. `includeSchemaInPrompt` decides whether a guided request's
/// schema is rendered after its prompt (`nil`: yes); leaving it out saves those tokens on every
/// request whose instructions already describe the value. `reasoningLevel` has the model reason
/// before it responds: at most 64 tokens (`light`), 256 (`moderate`), 1,024 (`deep`) or the
/// number a `custom` level names, written between `<think>` and `</think>` (the vocabulary's tokens
/// where it has them) at the start of the assistant turn and kept as a `.reasoning` transcript
/// entry. Like reasoning models' chat templates, later requests leave it out of the history, so the
/// turn after one recomputes the response that followed the reasoning: see README, "Reasoning".
public struct ContextOptions: Sendable, Hashable, Codable {
    /// Whether a guided request renders its schema after the prompt; `nil` means yes. No
    /// effect on a request without a schema.
    public var includeSchemaInPrompt: Bool?
    /// How much reasoning the model may write before its response; `nil` takes the profile's
    /// (``LanguageModelSession/DynamicProfile/reasoningLevel(_:)``), and none when that is `nil` too.
    public var reasoningLevel: ReasoningLevel?

    /// Options for how the model is prompted.
    public init(includeSchemaInPrompt: Bool? = nil, reasoningLevel: ReasoningLevel? = nil) {
        self.includeSchemaInPrompt = includeSchemaInPrompt
        self.reasoningLevel = reasoningLevel
    }

    /// How much reasoning a model may output before its response.
    public enum ReasoningLevel: Sendable, Hashable, Codable {
        /// Little reasoning, for quick responses.
        case light
        /// A moderate amount.
        case moderate
        /// Deep reasoning, for more analysis.
        case deep
        /// A level the other cases do not name: here a number of tokens (`custom("512")`); any
        /// other text is refused with ``LanguageModelError/invalidOptions(option:reason:)``.
        case custom(String)
    }
}
