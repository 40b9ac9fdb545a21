import Foundation
import LMRuntime
import Observation

/// A conversation with a language model that reuses its KV cache exactly between requests.
///
/// Shaped like FoundationModels' `LanguageModelSession`: instructions, tools, a
/// transcript, `respond`, `streamResponse`, `prewarm(promptPrefix:)`, dynamic
/// instructions and profiles. Every request renders the whole context (instructions,
/// tools, history, prompt) segment by segment, keeps the longest prefix the cache
/// already holds, and computes only the rest; its ``Response/usage`` says how much was
/// reused and its ``Response/invalidation`` says why the rest was not.
///
/// Safe to use from async code: one request runs at a time (a second one throws
/// ``LanguageModelSession/Error/concurrentRequests``); a request that arrives while
/// ``prewarm(promptPrefix:)`` runs waits for it.
///
/// `Observable`: a SwiftUI view (or `withObservationTracking`) that reads ``isResponding``,
/// ``transcript`` or ``usage`` updates when they change.
public final class LanguageModelSession: Sendable, Observable {
    struct State {
        var instructions = Transcript.Instructions(texts: [])
        var history: [Transcript.Entry]
        var usage = Usage()
        var isResponding = false
        var prewarm: Task<Void, Never>?
        var policy = TranscriptErrorHandlingPolicy.preserveTranscript
        var steering: (@Sendable ([Int]) -> Int?)?
        var requestCount: UInt64 = 0
        /// Custom session properties (``SessionPropertyEntry()``), kept between requests.
        var customProperties: [String: any Sendable] = [:]
        /// Counts replacements of the transcript through ``transcript``'s setter, so that a
        /// request can tell that its history was replaced while it ran.
        var transcriptVersion: UInt64 = 0
    }

    let languageModel: any LanguageModel
    let source: AnyDynamicProfile
    let state: Locked<State>
    private let engineSlot = Locked<SessionEngine?>(nil)
    private let registrar = ObservationRegistrar()

    /// Changes the state under its lock, telling observers of `keyPath`.
    func changing<Member, R: Sendable>(_ keyPath: KeyPath<LanguageModelSession, Member>,
                                       _ body: (inout sending State) throws -> sending R) rethrows -> R {
        try registrar.withMutation(of: self, keyPath: keyPath) { try state.withLock { try body(&$0) } }
    }

    init(model: any LanguageModel, source: AnyDynamicProfile, history: [Transcript.Entry],
         instructions: Transcript.Instructions = .init(texts: [])) {
        languageModel = model
        self.source = source
        state = Locked(State(instructions: instructions, history: history))
    }

    // MARK: Creating a session

    /// A session with fixed instructions and tools.
    /// - Parameters:
    ///   - model: the model (the bundled `base` by default).
    ///   - tools: tools the model may call; their definitions follow the instructions.
    ///   - instructions: what the model should do.
    public convenience init(model: any LanguageModel = SystemLanguageModel.default, tools: [any Tool] = [],
                            instructions: Instructions? = nil) {
        let texts = instructions.map { [$0.text] } ?? []
        self.init(model: model, source: Self.fixed(texts: texts, tools: tools), history: [],
                  instructions: .init(texts: texts, toolDefinitions: tools.map(\.definition)))
    }

    /// A session with fixed instructions given as a string.
    public convenience init(model: any LanguageModel = SystemLanguageModel.default, tools: [any Tool] = [],
                            instructions: String) {
        self.init(model: model, tools: tools, instructions: Instructions(instructions))
    }

    /// A session with fixed instructions built from strings.
    public convenience init(model: any LanguageModel = SystemLanguageModel.default, tools: [any Tool] = [],
                            @InstructionsBuilder instructions: () -> [String]) {
        self.init(model: model, tools: tools, instructions: Instructions(instructions().joined(separator: "\n")))
    }

    /// A session that continues a saved transcript (rehydration).
    ///
    /// The transcript's leading instructions become the session's instructions; `tools`
    /// are the tools offered now. The first request computes the whole transcript, unless
    /// ``prewarm(promptPrefix:)`` ran first.
    public convenience init(model: any LanguageModel = SystemLanguageModel.default, tools: [any Tool] = [],
                            transcript: Transcript) {
        var loaded = Transcript.Instructions(texts: [], toolDefinitions: tools.map(\.definition))
        if case let .instructions(i) = transcript.entries.first { loaded = i }
        self.init(model: model, source: Self.fixed(texts: loaded.texts, tools: tools), history: transcript.history,
                  instructions: loaded)
    }

    /// A session driven by a dynamic profile, re-resolved before every request.
    /// - Parameters:
    ///   - profile: the profile; its model (or the default one) runs the session.
    ///   - history: transcript entries after the instructions.
    public convenience init(profile: some DynamicProfile, history: some Collection<Transcript.Entry> = []) {
        let erased = AnyDynamicProfile(erasing: profile)
        let model = erased.resolveProfile(path: "").model ?? SystemLanguageModel.default
        self.init(model: model, source: erased, history: Array(history))
    }

    /// A session whose instructions and tools are re-evaluated before every request.
    public convenience init(model: any LanguageModel = SystemLanguageModel.default,
                            dynamicInstructions: some DynamicInstructions,
                            history: some Collection<Transcript.Entry> = []) {
        let profile = Profile(evaluating: dynamicInstructions)
        self.init(model: model, source: AnyDynamicProfile(erasing: profile), history: Array(history))
    }

    static func fixed(texts: [String], tools: [any Tool]) -> AnyDynamicProfile {
        let components = texts.map(InstructionComponent.text) + tools.map(InstructionComponent.tool)
        return AnyDynamicProfile(erasing: Profile(evaluating: InstructionGroup(parts: components)))
    }

    // MARK: State

    /// Whether a request is running.
    public var isResponding: Bool {
        registrar.access(self, keyPath: \.isResponding)
        return state.withLock { $0.isResponding }
    }

    /// The instructions followed by every prompt, tool call and response. The instructions are
    /// the session's own from the start (a rehydrated session's, the loaded entry itself), and
    /// a dynamic profile's as its last request resolved them (empty before the first).
    ///
    /// Settable: the new transcript's entries after its leading instructions become the
    /// history (the instructions come from the session's own instructions or profile). The
    /// next request renders the new history and reuses the cache up to the first difference.
    /// Set while a request runs, the new transcript stands and that request throws
    /// ``LanguageModelSession/Error/transcriptMutationWhileResponding`` instead of appending
    /// its entries.
    public var transcript: Transcript {
        get {
            registrar.access(self, keyPath: \.transcript)
            return state.withLock { Transcript(entries: [.instructions($0.instructions)] + $0.history) }
        }
        set {
            changing(\.transcript) {
                $0.history = newValue.history
                $0.transcriptVersion &+= 1
            }
        }
    }

    /// Token counts and timings summed over every request and prewarm of this session.
    public var usage: Usage {
        registrar.access(self, keyPath: \.usage)
        return state.withLock { $0.usage }
    }

    /// What happens to the transcript when a response is cut off by the context window.
    public var transcriptErrorHandlingPolicy: TranscriptErrorHandlingPolicy {
        get { state.withLock { $0.policy } }
        set { state.withLock { $0.policy = newValue } }
    }

    /// Forces tokens during decoding: called with the tokens generated so far, it returns a
    /// token id to emit or `nil` to sample. A seam for tests and demos (a scripted tool call,
    /// a fixed answer); `nil` turns it off.
    public func setTokenSteering(_ steering: (@Sendable (_ generated: [Int]) -> Int?)?) {
        state.withLock { $0.steering = steering }
    }

    /// The tokens the KV cache holds now (for inspection and tests).
    public var cachedTokens: [Int] {
        get async throws { try await engine().cachedTokens }
    }

    /// The session's engine, created (and the model loaded) on first use.
    func engine() throws -> SessionEngine {
        if let engine = engineSlot.withLock({ $0 }) { return engine }
        let created: SessionEngine
        do { created = SessionEngine(model: try languageModel.loaded()) } catch let error as ModelLoadError {
            throw SystemLanguageModel.Error.assetsUnavailable(.init(error))
        }
        return engineSlot.withLock { slot in
            if let existing = slot { return existing }
            slot = created
            return created
        }
    }
}
