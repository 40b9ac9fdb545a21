import Foundation

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

    /// Sets the sampling temperature (`nil`: the model's default).
    public func temperature(_ value: Double?) -> ModifiedProfile<Self> { modified { $0.options.temperature = value } }

    /// Sets the response budget (`nil`: no limit).
    public func maximumResponseTokens(_ value: Int?) -> ModifiedProfile<Self> {
        modified { $0.options.maximumResponseTokens = value }
    }

    /// Sets whether responses may, must or must not call tools (`nil`: they may).
    public func toolCallingMode(_ mode: GenerationOptions.ToolCallingMode?) -> ModifiedProfile<Self> {
        modified { $0.options.toolCallingMode = mode }
    }

    /// Sets the sampling mode (`nil`: the default, random sampling).
    public func samplingMode(_ mode: GenerationOptions.SamplingMode?) -> ModifiedProfile<Self> {
        modified { $0.options.samplingMode = mode }
    }

    /// Sets how much reasoning the model writes before each response (see
    /// ``ContextOptions/reasoningLevel``); a request's own `contextOptions` level wins.
    public func reasoningLevel(_ level: ContextOptions.ReasoningLevel?) -> ModifiedProfile<Self> {
        modified { $0.reasoningLevel = level }
    }

    /// Runs `action` whenever the model has reasoned, before it responds (once per request that
    /// reasons).
    public func onReasoning(perform action: @escaping LanguageModelSession.Hook) -> ModifiedProfile<Self> {
        modified { $0.reasoningHooks.append(action) }
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
