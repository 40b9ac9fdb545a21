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

/// The top level of dynamic session configuration: a body that resolves to one profile.
///
/// The body is evaluated before every request; when it resolves to a different branch
/// than the previous request, the session treats it as a profile switch (a deliberate
/// reset of the KV cache, reported as such).
public protocol DynamicProfile {
    /// The type of ``body``.
    associatedtype Body: DynamicProfile = Never
    /// The profile for the current app state.
    @DynamicProfileBuilder var body: Body { get }
    /// Resolves to the active profile; `path` identifies the branch taken so far.
    func resolveProfile(path: String) -> LanguageModelSession.Profile
}

extension DynamicProfile {
    /// Resolves ``body``.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile { body.resolveProfile(path: path) }
}

extension DynamicProfile where Body == Never {
    /// Primitive profiles resolve directly and have no body.
    public var body: Never { fatalError("\(Self.self) is primitive: it resolves directly and has no body") }
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

/// One of two profiles, from an `if`/`else` in a dynamic profile's body.
public enum ConditionalProfile<First: DynamicProfile, Second: DynamicProfile>: DynamicProfile {
    /// The `if` branch.
    case first(First)
    /// The `else` branch.
    case second(Second)

    /// Resolves the branch taken, recording which one.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile {
        switch self {
        case let .first(p): p.resolveProfile(path: path + "/if")
        case let .second(p): p.resolveProfile(path: path + "/else")
        }
    }
}

/// Builds a dynamic profile's body: one profile, or `if`/`else` between profiles.
@resultBuilder
public enum DynamicProfileBuilder {
    /// A single profile.
    public static func buildBlock<P: DynamicProfile>(_ profile: P) -> P { profile }
    /// The `if` branch.
    public static func buildEither<F: DynamicProfile, S: DynamicProfile>(first: F) -> ConditionalProfile<F, S> { .first(first) }
    /// The `else` branch.
    public static func buildEither<F: DynamicProfile, S: DynamicProfile>(second: S) -> ConditionalProfile<F, S> { .second(second) }
}

/// A type-erased dynamic profile.
public struct AnyDynamicProfile: DynamicProfile, @unchecked Sendable {
    private let resolve: (String) -> LanguageModelSession.Profile

    /// Wraps `dynamicProfile`.
    public init(_ dynamicProfile: any DynamicProfile) { resolve = { dynamicProfile.resolveProfile(path: $0) } }

    /// Wraps `dynamicProfile`.
    public init(erasing dynamicProfile: some DynamicProfile) { self.init(dynamicProfile) }

    /// Resolves the wrapped profile.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile { resolve(path) }
}

/// A dynamic profile with a modifier applied to whatever it resolves to.
public struct ModifiedProfile<Content: DynamicProfile>: DynamicProfile {
    let content: Content
    let modify: (inout LanguageModelSession.Profile) -> Void

    /// Resolves the content, then applies the modifier.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile {
        var profile = content.resolveProfile(path: path)
        modify(&profile)
        return profile
    }
}

extension DynamicProfile {
    private func modified(_ change: @escaping (inout LanguageModelSession.Profile) -> Void) -> ModifiedProfile<Self> {
        ModifiedProfile(content: self, modify: change)
    }

    /// Transforms the history before the model sees it; the stored transcript is unchanged.
    public func historyTransform(_ transform: @escaping LanguageModelSession.HistoryTransform) -> ModifiedProfile<Self> {
        modified { $0.historyTransforms.append(transform) }
    }

    /// Runs `action` before the model is invoked; an error it throws fails the request.
    public func onPrompt(perform action: @escaping LanguageModelSession.Hook) -> ModifiedProfile<Self> {
        modified { $0.promptHooks.append(action) }
    }

    /// Runs `action` after a response; writing `@SessionProperty(\.history)` in it changes
    /// the stored transcript (a stateful transform). An error it throws fails the request.
    public func onResponse(perform action: @escaping LanguageModelSession.Hook) -> ModifiedProfile<Self> {
        modified { $0.responseHooks.append(action) }
    }

    /// Runs `action` with each tool call the model makes, before the tool runs (throwing stops the request).
    public func onToolCall(perform action: @escaping LanguageModelSession.ToolCallHook) -> ModifiedProfile<Self> {
        modified { $0.toolCallHooks.append(action) }
    }

    /// Runs `action` with each tool's output, before the model reads it.
    public func onToolOutput(perform action: @escaping LanguageModelSession.ToolOutputHook) -> ModifiedProfile<Self> {
        modified { $0.toolOutputHooks.append(action) }
    }

    /// Sets the sampling temperature.
    public func temperature(_ value: Double) -> ModifiedProfile<Self> { modified { $0.options.temperature = value } }

    /// Sets the response budget.
    public func maximumResponseTokens(_ value: Int) -> ModifiedProfile<Self> {
        modified { $0.options.maximumResponseTokens = value }
    }

    /// Sets whether responses may, must or must not call tools.
    public func toolCallingMode(_ mode: GenerationOptions.ToolCallingMode) -> ModifiedProfile<Self> {
        modified { $0.options.toolCallingMode = mode }
    }

    /// Sets the sampling mode.
    public func samplingMode(_ mode: GenerationOptions.SamplingMode) -> ModifiedProfile<Self> {
        modified { $0.options.samplingMode = mode }
    }

    /// Sets the model.
    public func model(_ model: any LanguageModel) -> ModifiedProfile<Self> { modified { $0.model = model } }
}

extension DynamicProfile {
    /// ``LanguageModelSession/Profile``, usable unqualified inside a profile's body.
    public typealias Profile = LanguageModelSession.Profile
    /// ``LanguageModelSession/SessionProperty``, usable unqualified inside a profile.
    public typealias SessionProperty = LanguageModelSession.SessionProperty
}
