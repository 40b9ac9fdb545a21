import Foundation

extension LanguageModelSession {
    /// A stateless history transform: changes what the model sees, never the stored transcript.
    ///
    /// Not `@Sendable`: a transform may capture app state as Apple-style code does; the
    /// session runs its transforms inside its own requests, one request at a time.
    public typealias HistoryTransform = ([Transcript.Entry]) -> [Transcript.Entry]
    /// A hook run before generation (`onPrompt`) or after a response (`onResponse`).
    public typealias Hook = @Sendable () async throws -> Void
    /// A hook run with each tool call the model makes, before the tool runs.
    public typealias ToolCallHook = @Sendable (Transcript.ToolCall) async throws -> Void
    /// A hook run with each tool's output, before the model reads it.
    public typealias ToolOutputHook = @Sendable (Transcript.ToolOutput) async throws -> Void

    /// Dynamic instructions bound to session configuration: sampling, limits, history
    /// transforms and hooks.
    ///
    /// The instructions closure runs again before every request, so conditions in it
    /// follow app state. Modifiers return a new profile.
    public struct Profile: DynamicProfile, @unchecked Sendable {
        let makeComponents: () -> [InstructionComponent]
        var historyTransforms: [HistoryTransform] = []
        var promptHooks: [Hook] = []
        var responseHooks: [Hook] = []
        var toolCallHooks: [ToolCallHook] = []
        var toolOutputHooks: [ToolOutputHook] = []
        /// Run when the model has reasoned, before it responds.
        var reasoningHooks: [Hook] = []
        /// How much reasoning the model writes before responding; `nil` for none.
        var reasoningLevel: ContextOptions.ReasoningLevel?
        var options = GenerationOptions()
        var model: (any LanguageModel)?
        /// Which branch of a dynamic profile's body produced this profile; a change is a profile switch.
        var identity = ""

        /// A profile whose instructions and tools come from a builder, evaluated before each request.
        public init<Content: DynamicInstructions>(@DynamicInstructionsBuilder _ dynamicInstructions: @escaping () -> Content) {
            makeComponents = { dynamicInstructions().components() }
        }

        /// A profile over dynamic instructions given as a value (its body is re-evaluated per request).
        init(evaluating instructions: some DynamicInstructions) { makeComponents = { instructions.components() } }

        /// A profile is its own resolution.
        public func resolveProfile(path: String) -> Profile {
            var copy = self
            copy.identity = path + copy.identity
            return copy
        }
    }
}

extension Never: DynamicProfile {
    // `body` is declared once, in DynamicInstructions.swift, and serves both protocols.
    /// Never called.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile {
        fatalError("Never has no profile")
    }
}

extension LanguageModelSession {
    /// Re-exported so `DynamicProfile` conformers can write `Profile { ... }`.
    public typealias DynamicProfile = LMSession.DynamicProfile
}
