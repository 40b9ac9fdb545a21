/// How a request is put to the model, beside how its tokens are sampled (``GenerationOptions``).
///
/// FoundationModels' iOS 27 shape. `includeSchemaInPrompt` decides whether a guided request's
/// schema is rendered after its prompt (`nil`: yes); leaving it out saves those tokens on every
/// request whose instructions already describe the value. `reasoningLevel` is accepted and kept
/// for code written against models that reason: the models here never write reasoning, so it
/// changes nothing that is rendered or generated.
public struct ContextOptions: Sendable, Hashable, Codable {
    /// Whether a guided request renders its schema after the prompt; `nil` means yes. No
    /// effect on a request without a schema.
    public var includeSchemaInPrompt: Bool?
    /// How much reasoning the model may write before its response (no effect here).
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
        /// A level the other cases do not name.
        case custom(String)
    }
}
