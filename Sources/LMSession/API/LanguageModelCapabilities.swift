/// What a language model can do, so that code can check before it asks (FoundationModels'
/// iOS 27 shape). A request that needs a capability its model lacks throws
/// ``LanguageModelError/unsupportedCapability(_:)`` before computing anything.
public struct LanguageModelCapabilities: Sendable, Hashable {
    /// One thing a model may or may not do.
    public struct Capability: Sendable, Hashable, CustomStringConvertible {
        /// The capability's name.
        public let description: String

        /// Output constrained to a schema (`respond(to:generating:)` and the schema forms).
        public static var guidedGeneration: Capability { Capability(description: "guidedGeneration") }
        /// Calling the session's tools.
        public static var toolCalling: Capability { Capability(description: "toolCalling") }
        /// Reasoning apart from the response, asked for by ``ContextOptions/reasoningLevel``.
        public static var reasoning: Capability { Capability(description: "reasoning") }
    }

    /// The capabilities.
    public var capabilities: Set<Capability>

    /// A model's capabilities from a list.
    public init(_ capabilities: [Capability]) { self.capabilities = Set(capabilities) }

    /// Whether the model has `capability`.
    public func contains(_ capability: Capability) -> Bool { capabilities.contains(capability) }
}
