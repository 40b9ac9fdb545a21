import Foundation
import LMRuntime

/// Steps 1–3 of a request (DESIGN.md, "One request, as data"), shared by requests,
/// prewarming and response-cache keys: what the request renders, computed without
/// changing anything (unless `onPrompt` hooks run).
struct RequestPlan {
    /// 1. The active profile and its instructions and tools, in declaration order.
    var profile: LanguageModelSession.Profile
    var components: [InstructionComponent]
    /// The stored history (after `onPrompt` hooks, when they ran).
    var stored: [Transcript.Entry]
    /// 2. What the stateless transforms made of a copy of the history and the new prompt.
    var history: [Transcript.Entry]
    var prompt: Transcript.Prompt?
    /// 3. The request rendered segment by segment.
    var rendered: RenderedPrompt

    /// The offered tools, in declaration order.
    var tools: [any Tool] { components.compactMap { if case let .tool(t) = $0 { t } else { nil } } }
}

extension LanguageModelSession {
    /// Resolves the profile, transforms a copy of the history with `prompt` appended, and renders it.
    func plan(_ prompt: Transcript.Prompt?, runHooks: Bool, renderer: PromptRenderer, header: Bool = true) async throws -> RequestPlan {
        let (profile, components, stored) = try await resolve(runHooks: runHooks)
        var seen = transform(stored + (prompt.map { [.prompt($0)] } ?? []), with: profile)
        var transformed: Transcript.Prompt?
        if prompt != nil, case let .prompt(p)? = seen.last {
            transformed = p
            seen.removeLast()
        }
        let rendered = renderer.render(components, history: seen, prompt: transformed, header: header)
        return RequestPlan(profile: profile, components: components, stored: stored, history: seen, prompt: transformed,
                           rendered: rendered)
    }

    /// Resolves the active profile and its instructions inside a session context, running
    /// `onPrompt` hooks when asked; hooks may rewrite the stored history.
    func resolve(runHooks: Bool) async throws -> (Profile, [InstructionComponent], [Transcript.Entry]) {
        let context = SessionContext(state.withLock { .init(history: $0.history, entries: $0.customProperties) })
        let (profile, components) = SessionContext.$current.withValue(context) {
            let profile = source.resolveProfile(path: "")
            return (profile, profile.makeComponents())
        }
        if runHooks {
            for hook in profile.promptHooks { try await SessionContext.$current.withValue(context) { try await hook() } }
            let values = context.values
            changing(\.transcript) { $0.history = values.history; $0.customProperties = values.entries }
        }
        return (profile, components, context.history)
    }

    func transform(_ history: [Transcript.Entry], with profile: Profile) -> [Transcript.Entry] {
        profile.historyTransforms.reduce(history) { $1($0) }
    }

    /// Appends a request's entries and usage, and keeps the instructions it resolved.
    /// - Throws: ``LanguageModelSession/Error/transcriptMutationWhileResponding`` (recording
    ///   only the usage: the work was done) when the transcript was replaced since the request
    ///   began at `version`.
    func record(profile: Profile, components: [InstructionComponent], added: [Transcript.Entry], usage: Usage,
                since version: UInt64) throws {
        var texts: [String] = [], tools: [Transcript.ToolDefinition] = []
        for component in components {
            switch component {
            case let .text(t): texts.append(t)
            case let .tool(t): tools.append(t.definition)
            }
        }
        try changing(\.transcript) { state in
            state.usage = state.usage + usage
            guard state.transcriptVersion == version else { throw Error.transcriptMutationWhileResponding }
            if state.instructions.texts != texts || state.instructions.toolDefinitions != tools {   // else it keeps its id
                state.instructions = .init(texts: texts, toolDefinitions: tools)
            }
            state.history += added
        }
    }

    func runReasoningHooks(_ profile: Profile) async throws {
        try await run(profile.reasoningHooks) { try await $0() }
    }

    func runResponseHooks(_ profile: Profile) async throws {
        try await run(profile.responseHooks) { try await $0() }
    }

    /// Runs each of `hooks` through `call` where `@SessionProperty` reads and writes this
    /// session's values, then keeps what they changed (custom properties, history). Without
    /// hooks it does nothing, so observers see no change.
    func run<Hook>(_ hooks: [Hook], _ call: (Hook) async throws -> Void) async throws {
        guard !hooks.isEmpty else { return }
        let context = SessionContext(state.withLock { .init(history: $0.history, entries: $0.customProperties) })
        try await SessionContext.$current.withValue(context) { for hook in hooks { try await call(hook) } }
        let values = context.values
        changing(\.transcript) { $0.history = values.history; $0.customProperties = values.entries }
    }

    func decodingPlan(_ options: GenerationOptions, profile: Profile) throws -> Decoding {
        let budget = options.maximumResponseTokens ?? profile.options.maximumResponseTokens
        if let budget, budget < 0 {
            throw LanguageModelError.invalidOptions(option: "maximumResponseTokens", reason: "must not be negative, got \(budget)")
        }
        let temperature = options.temperature ?? profile.options.temperature ?? 1
        guard temperature >= 0, temperature.isFinite else {
            throw LanguageModelError.invalidOptions(option: "temperature", reason: "must be ≥ 0, got \(temperature)")
        }
        let mode = options.samplingMode ?? profile.options.samplingMode ?? .greedy
        let (steering, request) = state.withLock { ($0.steering, $0.requestCount) }
        let strategy: SamplingStrategy
        switch mode.kind {
        case .greedy: strategy = .greedy
        case let .top(k):
            guard k >= 1 else { throw LanguageModelError.invalidOptions(option: "samplingMode", reason: "top must be at least 1, got \(k)") }
            strategy = .topK(k, temperature: Float(temperature))
        case let .probabilityThreshold(p):
            guard p > 0, p <= 1 else { throw LanguageModelError.invalidOptions(option: "samplingMode", reason: "probabilityThreshold must be in (0, 1], got \(p)") }
            strategy = .topP(Float(p), temperature: Float(temperature))
        }
        return Decoding(strategy: strategy, seed: mode.seed ?? request, budget: budget, steering: steering, toolsOffered: false)
    }

    /// Response text: the decoded tokens without the leading space of the first piece.
    static func text(_ tokens: [Int], _ tokenizer: Tokenizer) -> String {
        let text = tokenizer.decode(tokens)
        return text.hasPrefix(" ") ? String(text.dropFirst()) : text
    }
}
