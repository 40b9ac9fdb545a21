import Foundation
import LMRuntime

/// One request, as DESIGN.md's seven steps ("One request, as data"), one call each.
struct Request {
    let session: LanguageModelSession
    let engine: SessionEngine
    let prompt: Transcript.Prompt
    let options: GenerationOptions
    /// The request's reasoning level (`ContextOptions`); `nil` takes the profile's.
    let reasoningLevel: ContextOptions.ReasoningLevel?
    let started: ContinuousClock.Instant
    /// The transcript's version when the request began (see `State.transcriptVersion`).
    let transcriptVersion: UInt64

    /// What `run` shows after each generated token: the content so far.
    struct Snapshot: Sendable {
        var raw: GeneratedContent
        var usage: LanguageModelSession.Usage
    }

    /// A response and its content as generated.
    typealias Result = (response: LanguageModelSession.Response<String>, raw: GeneratedContent)

    /// Runs the request; `onSnapshot` (when a stream listens) sees the content after each token.
    func run(onSnapshot: (@Sendable (Snapshot) -> Void)?) async throws -> Result {
        // 1–3. Resolve the profile (running onPrompt), transform a copy of the history, render.
        let plan = try await session.plan(prompt, runHooks: true, renderer: engine.renderer)
        let mode = options.toolCallingMode ?? plan.profile.options.toolCallingMode ?? .allowed
        let level = reasoningLevel ?? plan.profile.reasoningLevel
        try checkCapabilities(offeringTools: !plan.tools.isEmpty && mode != .disallowed, reasoning: level != nil)
        let reasoning = try level.map(Self.reasoningTokens)
        let guidance = try Guidance(format: prompt.responseFormat, tools: plan.tools, mode: mode, engine: engine)
        defer { guidance.giveBack() }
        var decoding = try session.decodingPlan(options, profile: plan.profile)
        decoding.toolsOffered = !plan.tools.isEmpty
        decoding = try guidance.constrain(decoding, round: 0, mode: mode)
        // 5. Check the window before computing anything (reasoning gets what it leaves).
        let reserved = try checkWindow(plan.rendered, decoding)
        // 4 and 6. Reuse the cache, prefill the rest, (reason,) decode; run tools on the way.
        let turn = try await generate(plan, decoding, guidance, reserved: reserved, reasoning: reasoning, onSnapshot)
        // 7. Append to the transcript, run onResponse, publish the metrics.
        return try await finish(turn, plan, guidance, reserved: reserved)
    }

    /// Throws `unsupportedCapability` when the request needs guided generation, tool calling or
    /// reasoning and the model lacks it.
    private func checkCapabilities(offeringTools: Bool, reasoning: Bool) throws {
        let capabilities = session.languageModel.capabilities
        for (needed, capability) in [(prompt.responseFormat != nil, LanguageModelCapabilities.Capability.guidedGeneration),
                                     (offeringTools, .toolCalling), (reasoning, .reasoning)] where needed && !capabilities.contains(capability) {
            throw LanguageModelError.unsupportedCapability(.init(
                capability: capability, debugDescription: "the model does not support \(capability), which the request needs"))
        }
    }

    /// The response budget reserved for this request; throws `contextSizeExceeded` when the
    /// rendered request and the budget (one token without a limit, or the shortest valid
    /// structured value) do not fit the window.
    private func checkWindow(_ rendered: RenderedPrompt, _ decoding: Decoding) throws -> Int {
        let reserved = decoding.budget ?? max(1, decoding.guide?.remaining ?? 1)
        guard rendered.tokens.count + reserved <= engine.contextSize else {
            throw LanguageModelError.contextSizeExceeded(.init(
                contextSize: engine.contextSize, tokenCount: rendered.tokens.count + reserved,
                promptTokenCount: rendered.tokens.count, responseBudget: reserved))
        }
        return reserved
    }

    /// The most tokens a reasoning level lets the model reason: 64 (light), 256 (moderate),
    /// 1,024 (deep), or a custom level's number.
    /// - Throws: ``LanguageModelError/invalidOptions(option:reason:)`` for a custom level that is
    ///   not a positive number of tokens.
    static func reasoningTokens(_ level: ContextOptions.ReasoningLevel) throws -> Int {
        switch level {
        case .light: return 64
        case .moderate: return 256
        case .deep: return 1024
        case let .custom(text):
            guard let tokens = Int(text.trimmingCharacters(in: .whitespaces)), tokens > 0 else {
                throw LanguageModelError.invalidOptions(
                    option: "reasoningLevel", reason: "custom(\"\(text)\") is not a positive number of tokens, which a custom level names here")
            }
            return tokens
        }
    }

    /// `tokens` of reasoning, cut to what the window leaves beside the request, the response's
    /// reservation and the reasoning's markers; `nil` (no reasoning) when it leaves none.
    private func fitting(_ tokens: Int, _ rendered: RenderedPrompt, _ reserved: Int) -> Int? {
        let markers = engine.renderer.reasoningOpen.count + engine.renderer.reasoningClose.count
        let room = engine.contextSize - rendered.tokens.count - reserved - markers
        return room > 0 ? min(tokens, room) : nil
    }

    /// What generation produced: the last run, the entries added before the response (tool
    /// rounds), the usage, the invalidation report of the first run, the last rendered request.
    struct Turn {
        var outcome: RunOutcome
        var added: [Transcript.Entry] = []
        var usage = LanguageModelSession.Usage()
        var invalidation: InvalidationReport?
        var rendered: RenderedPrompt
        var guide: GuidedDecoder?
        /// Where the request's first reasoning began (before its assistant header), when it reasoned.
        var reasoningStart: Int?
        /// Set when a later tool round no longer fits the window (the tools' entries made the
        /// request longer): the turn ends there, as when the window fills mid-response.
        var overflow: LanguageModelError?
    }

    /// Runs the rounds: in each, reasoning of at most `reasoning` tokens (when asked, and as far
    /// as the window leaves room beside the `reserved` response), then the answer or a tool call.
    private func generate(_ plan: RequestPlan, _ first: Decoding, _ guidance: Guidance, reserved: Int, reasoning: Int?,
                          _ onSnapshot: (@Sendable (Snapshot) -> Void)?) async throws -> Turn {
        var switched = await engine.switchProfile(to: plan.profile.identity)
        var decoding = first
        var rendered = plan.rendered
        var added: [Transcript.Entry] = []
        var turn: Turn?
        var thoughts: [PromptRenderer.Reasoning] = []
        var reserved = reserved
        for round in 0... {
            if round > 0 {
                // The tool hooks may have changed what the profile asks (`.toolCallingMode(done ? .allowed
                // : .required)`): read its mode again; the instructions and tools stay the request's.
                var mode = options.toolCallingMode
                if mode == nil { mode = try await session.resolve(runHooks: false).0.options.toolCallingMode }
                decoding = try guidance.constrain(first, round: round, mode: mode ?? .allowed)
                // The tool's entries lengthened the request: check the window again before the round.
                do { reserved = try checkWindow(rendered, decoding) } catch let error as LanguageModelError {
                    turn!.overflow = error
                    break
                }
            }
            if let tokens = reasoning.flatMap({ fitting($0, rendered, reserved) }) {
                // The model reasons first, in the assistant turn, which the answer (or a call) continues.
                let (outcome, opened) = try await reason(plan, first, tokens: tokens, after: added, thoughts, profileSwitched: switched)
                switched = false
                if turn == nil { turn = Turn(outcome: outcome, invalidation: outcome.reuse.report, rendered: opened) }
                if turn!.reasoningStart == nil { turn!.reasoningStart = opened.spans.last?.range.lowerBound }
                turn!.record(outcome, started: started)
                turn!.usage.output.reasoningTokenCount += outcome.generated.count
                let text = LanguageModelSession.text(outcome.generated, engine.model.tokenizer)
                added.append(.reasoning(Transcript.Reasoning(segments: [.text(.init(content: text))])))
                thoughts.append(.init(tokens: outcome.generated, isClosed: true))
                rendered = engine.renderer.render(plan.components, history: plan.history, prompt: plan.prompt, after: added, reasoning: thoughts)
                try await session.runReasoningHooks(plan.profile)
            }
            let outcome: RunOutcome
            do {
                outcome = try await engine.run(rendered, profileSwitched: switched, decoding: decoding,
                                               started: started) { tokens in
                    // Only a listening stream pays for decoding (and parsing) the content so far.
                    guard let onSnapshot else { return }
                    var usage = LanguageModelSession.Usage()
                    usage.output.totalTokenCount = tokens.count
                    if let raw = guidance.partialContent(tokens) { onSnapshot(.init(raw: raw, usage: usage)) }
                }
            } catch let error as RuntimeError {
                throw LanguageModelError.runtime(error)
            }
            switched = false
            if turn == nil { turn = Turn(outcome: outcome, invalidation: outcome.reuse.report, rendered: rendered) }
            turn!.record(outcome, started: started)
            turn!.rendered = rendered
            if round == 0 { turn!.guide = decoding.guide }
            // `constrain` decides whether a round may call; a round that did not call answered.
            guard case let .toolCall(callTokens) = outcome.ending else { break }
            // A tool call: record it, run the tool, record its output, and let the model continue.
            added += try await session.callTool(callTokens, profile: plan.profile, tools: plan.tools, renderer: engine.renderer)
            rendered = engine.renderer.render(plan.components, history: plan.history, prompt: plan.prompt, after: added, reasoning: thoughts)
        }
        turn!.added = added
        return turn!
    }

    /// A reasoning run: the request (with what the request `added` so far, its reasoning as
    /// `thoughts`) and a reasoning opened after the response header, then free text (no grammar,
    /// no calls) until `</think>` where it is a token, the end of the turn, or `tokens`. Returns
    /// the run and what it rendered.
    private func reason(_ plan: RequestPlan, _ first: Decoding, tokens: Int, after added: [Transcript.Entry],
                        _ thoughts: [PromptRenderer.Reasoning], profileSwitched: Bool) async throws -> (RunOutcome, RenderedPrompt) {
        let opened = engine.renderer.render(plan.components, history: plan.history, prompt: plan.prompt,
                                            after: added + [.reasoning(Transcript.Reasoning(segments: []))],
                                            reasoning: thoughts + [.init(tokens: [], isClosed: false)], header: false)
        var decoding = Decoding(strategy: first.strategy, seed: first.seed, budget: tokens, steering: first.steering, toolsOffered: false)
        decoding.stopToken = engine.renderer.reasoningEnd
        do {
            return (try await engine.run(opened, profileSwitched: profileSwitched, decoding: decoding, started: started) { _ in }, opened)
        } catch let error as RuntimeError {
            throw LanguageModelError.runtime(error)
        }
    }

    private func finish(_ turn: Turn, _ plan: RequestPlan, _ guidance: Guidance, reserved: Int) async throws -> Result {
        let outcome = turn.outcome
        var usage = turn.usage
        if let overflow = turn.overflow {
            // A tool round that no longer fits: the policy decides whether the transcript keeps
            // the prompt and the tool rounds so far (the cache holds them already).
            let preserve = session.state.withLock { $0.policy } == .preserveTranscript
            try session.record(profile: plan.profile, components: plan.components, added: preserve ? [.prompt(prompt)] + turn.added : [],
                               usage: usage, since: transcriptVersion)
            throw overflow
        }
        usage.output.totalTokenCount = outcome.generated.count + usage.output.reasoningTokenCount
        usage.guidedMaskNanoseconds = turn.guide?.maskNanoseconds ?? []
        let text = LanguageModelSession.text(outcome.generated, engine.model.tokenizer)
        let (raw, structure) = outcome.ending == .contextFull ? (GeneratedContent(kind: .string(text)), nil) : try guidance.content(text)
        let response = Transcript.Response(text: text, tokenIDs: outcome.generated, structure: structure,
                                           assetIDs: [engine.renderer.assetID])
        let entries = [Transcript.Entry.prompt(prompt)] + turn.added + [.response(response)]
        if outcome.ending == .contextFull {
            // The window filled mid-response: the policy decides what the transcript keeps.
            let preserve = session.state.withLock { $0.policy } == .preserveTranscript
            try session.record(profile: plan.profile, components: plan.components, added: preserve ? entries : [], usage: usage,
                               since: transcriptVersion)
            throw LanguageModelError.contextSizeExceeded(.init(
                contextSize: engine.contextSize, tokenCount: outcome.inputTokens + outcome.generated.count,
                promptTokenCount: outcome.inputTokens, responseBudget: reserved))
        }
        // Run the last token and the closing marker so the cache holds the turn as it will render,
        // and share it. A reasoned turn renders without its reasoning from the next request on: its
        // rows past the prompt would serve no one, so it is shared only up to there.
        if try await engine.close(after: outcome.pending) > 0 {
            await engine.publish(turn.rendered, turnEnded: true, upTo: turn.reasoningStart)
        }
        try session.record(profile: plan.profile, components: plan.components, added: entries, usage: usage, since: transcriptVersion)
        try await session.runResponseHooks(plan.profile)
        return (LanguageModelSession.Response(content: response.text, rawContent: raw, transcriptEntries: ArraySlice(entries),
                                              usage: usage, invalidation: turn.invalidation), raw)
    }
}

extension Request.Turn {
    /// Adds one run's counts: input and reuse from the first run, computation from every run.
    mutating func record(_ run: RunOutcome, started: ContinuousClock.Instant) {
        if usage.input.totalTokenCount == 0 {
            usage.input = .init(totalTokenCount: run.inputTokens, cachedTokenCount: run.reuse.cached)
            usage.input.cachedFromSessionCount = run.reuse.kept
            usage.input.cachedFromSharedStoreCount = run.reuse.restored.fromMemory
            usage.input.cachedFromDiskCount = run.reuse.restored.fromDisk
            usage.timeToFirstToken = run.firstToken ?? started.duration(to: .now)
        }
        usage.computedTokenCount += run.computedTokens
        usage.prefillDuration += run.prefill
        usage.decodeDuration += run.decode
        outcome = run
    }
}

extension LanguageModelSession {
    /// Runs a request, holding the session's one-request-at-a-time flag and waiting for a prewarm.
    func perform(_ prompt: Prompt, options: GenerationOptions, format: Transcript.ResponseFormat?,
                 reasoningLevel: ContextOptions.ReasoningLevel? = nil,
                 metadata: [String: GeneratedContent] = [:], onSnapshot: (@Sendable (Request.Snapshot) -> Void)? = nil) async throws -> Request.Result {
        let started = ContinuousClock.now
        let (pendingPrewarm, version) = try changing(\.isResponding) { state -> (Task<Void, Never>?, UInt64) in
            guard !state.isResponding else { throw Error.concurrentRequests }
            state.isResponding = true
            state.requestCount += 1
            return (state.prewarm, state.transcriptVersion)
        }
        defer { changing(\.isResponding) { $0.isResponding = false } }
        await pendingPrewarm?.value
        state.withLock { $0.prewarm = nil }
        let request = Request(session: self, engine: try engine(), prompt: .init(text: prompt.text, options: options, responseFormat: format, metadata: metadata),
                              options: options, reasoningLevel: reasoningLevel, started: started, transcriptVersion: version)
        return try await request.run(onSnapshot: onSnapshot)
    }

    /// Streams a request's snapshots, converted to `Content`.
    func stream<Content: Generable>(_ prompt: Prompt, options: GenerationOptions, format: Transcript.ResponseFormat?,
                                    reasoningLevel: ContextOptions.ReasoningLevel?, metadata: [String: GeneratedContent]) -> ResponseStream<Content> {
        let (stream, continuation) = AsyncThrowingStream<ResponseStream<Content>.Snapshot, any Swift.Error>.makeStream()
        let task = Task<Response<Content>, any Swift.Error> {
            do {
                let (response, raw) = try await perform(prompt, options: options, format: format, reasoningLevel: reasoningLevel,
                                                  metadata: metadata) { snapshot in
                    guard let content = try? Content.PartiallyGenerated(snapshot.raw) else { return }
                    continuation.yield(.init(content: content, rawContent: snapshot.raw, usage: snapshot.usage))
                }
                continuation.finish()
                return try response.converted(raw)
            } catch {
                continuation.finish(throwing: error)
                throw error
            }
        }
        continuation.onTermination = { termination in
            if case .cancelled = termination { task.cancel() }
        }
        return ResponseStream(stream: stream, task: task)
    }
}
