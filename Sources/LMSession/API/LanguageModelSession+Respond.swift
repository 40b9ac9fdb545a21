import Foundation
import LMRuntime

extension LanguageModelSession {
    /// Tool rounds one response may take before the session stops offering more.
    static let maximumToolRounds = 4

    /// Responds to `prompt`.
    /// - Parameters:
    ///   - prompt: the prompt.
    ///   - options: sampling and length; unset fields come from the profile, then the defaults
    ///     (greedy, no length limit).
    /// - Returns: the response with its usage and invalidation report.
    /// - Throws: ``LanguageModelError/contextSizeExceeded(_:)`` before computing anything when the
    ///   prompt plus the response budget does not fit, ``LanguageModelError/concurrentRequests``,
    ///   `CancellationError`. A request that throws leaves the transcript as it was (except as
    ///   ``transcriptErrorHandlingPolicy`` says for a response cut off mid-way) and the cache exact.
    public func respond(to prompt: Prompt, options: GenerationOptions = GenerationOptions()) async throws -> Response<String> {
        try await perform(prompt, options: options, format: nil) { _ in }.response
    }

    /// Responds to a prompt given as a string.
    public func respond(to prompt: String, options: GenerationOptions = GenerationOptions()) async throws -> Response<String> {
        try await respond(to: Prompt(prompt), options: options)
    }

    /// Streams the response to `prompt` as growing snapshots; ``ResponseStream/collect()``
    /// gives the final ``Response``. Cancelling the consuming task cancels generation.
    public func streamResponse(to prompt: Prompt, options: GenerationOptions = GenerationOptions()) -> ResponseStream<String> {
        stream(prompt, options: options, format: nil)
    }

    /// Streams the response to a prompt given as a string.
    public func streamResponse(to prompt: String, options: GenerationOptions = GenerationOptions()) -> ResponseStream<String> {
        streamResponse(to: Prompt(prompt), options: options)
    }

    /// Computes, in the background, the KV cache for the instructions, the history and, if
    /// given, the start of the next prompt, so the next request only computes what follows.
    ///
    /// A request that arrives meanwhile waits for it; nothing is computed twice.
    public func prewarm(promptPrefix: Prompt? = nil) {
        state.withLock { state in
            guard !state.isResponding, state.prewarm == nil else { return }
            state.prewarm = Task { [self] in try? await self.performPrewarm(promptPrefix) }
        }
    }

    /// Keeps the K/V of this session's instructions and tool definitions in the model's shared
    /// prefix store until ``unpinInstructions()``, so every later session with the same ones
    /// starts from them however much else the store holds. Call it after a request or a
    /// finished ``prewarm(promptPrefix:)``, when those rows have been computed.
    /// - Returns: whether they were stored (and are now pinned).
    @discardableResult
    public func pinInstructions() async throws -> Bool { try await engine().pinPreamble(true) }

    /// Undoes one ``pinInstructions()``; returns whether a pin was removed.
    @discardableResult
    public func unpinInstructions() async throws -> Bool { try await engine().pinPreamble(false) }

    /// Waits until a ``prewarm(promptPrefix:)`` started earlier has finished (returns at once
    /// when none is running). Apps need not call it: a request waits by itself. Benchmarks do,
    /// to model a user who is still typing while the cache warms.
    public func waitForPrewarm() async {
        await state.withLock { $0.prewarm }?.value
    }

    // MARK: - The request pipeline (DESIGN.md, "One request, as data")

    private func performPrewarm(_ prefix: Prompt?) async throws {
        let engine = try engine()
        let (profile, components, history) = try await resolve(runHooks: false)
        var rendered = engine.renderer.render(components, history: transform(history, with: profile), prompt: nil, header: false)
        if let prefix { rendered.append(engine.renderer.renderPromptPrefix(prefix.text), as: .prompt) }
        guard rendered.tokens.count <= engine.contextSize else { return }
        let switched = await engine.switchProfile(to: profile.identity)
        let result = try await engine.prefill(rendered, profileSwitched: switched)
        changing(\.usage) { $0.usage.computedTokenCount += result.computed; $0.usage.prefillDuration += result.duration }
    }

    /// Streams `perform`'s snapshots, converted to `Content`.
    func stream<Content: Generable>(_ prompt: Prompt, options: GenerationOptions,
                                    format: Transcript.ResponseFormat?) -> ResponseStream<Content> {
        let (stream, continuation) = AsyncThrowingStream<ResponseStream<Content>.Snapshot, any Error>.makeStream()
        let task = Task<Response<Content>, any Error> {
            do {
                let (response, raw) = try await perform(prompt, options: options, format: format) { snapshot in
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

    /// What `perform` shows after each token: the content so far.
    struct PartialSnapshot: Sendable {
        var raw: GeneratedContent
        var usage: Usage
    }

    /// Steps 1–7 for one prompt; `onSnapshot` sees the content after each generated token.
    /// With a `format`, every token is constrained to the schema and the result is its value.
    func perform(_ prompt: Prompt, options: GenerationOptions, format: Transcript.ResponseFormat?,
                 onSnapshot: @escaping @Sendable (PartialSnapshot) -> Void) async throws -> (response: Response<String>, raw: GeneratedContent) {
        let started = ContinuousClock.now
        let pendingPrewarm = try changing(\.isResponding) { state -> Task<Void, Never>? in
            guard !state.isResponding else { throw LanguageModelError.concurrentRequests }
            state.isResponding = true
            state.requestCount += 1
            return state.prewarm
        }
        defer { changing(\.isResponding) { $0.isResponding = false } }
        await pendingPrewarm?.value
        state.withLock { $0.prewarm = nil }
        let engine = try engine()

        // 1. Resolve the profile (instructions and tools in declaration order) and run onPrompt.
        let (profile, components, stored) = try await resolve(runHooks: true)
        var decoding = try decodingPlan(options, profile: profile)
        decoding.toolsOffered = components.contains { if case .tool = $0 { true } else { false } }
        // Guided generation: the schema's compiled grammar (cached per model) constrains every token.
        let lent = try format.map { format in
            do { return try engine.model.grammars.take(format.schema) } catch let error as GenerationSchema.SchemaError {
                throw LanguageModelError.unsupportedSchema(error)
            }
        }
        defer { if let lent { engine.model.grammars.giveBack(lent.0, key: lent.key) } }
        if let lent {
            let guide = GuidedDecoder(masker: lent.0, stopToken: engine.renderer.end)
            if let budget = decoding.budget, budget < guide.remaining {
                throw LanguageModelError.invalidOptions(
                    option: "maximumResponseTokens", reason: "\(budget) cannot hold the shortest valid \(format!.name) (\(guide.remaining) tokens)")
            }
            decoding.guide = guide
        }
        // Tool calls: the call's body is decoded under the offered tools' schemas.
        let tools = components.compactMap { component -> (any Tool)? in if case let .tool(t) = component { t } else { nil } }
        let mode = options.toolCallingMode ?? profile.options.toolCallingMode ?? .allowed
        let callGrammar = try (tools.isEmpty || mode == .disallowed || format != nil) ? nil : {
            do { return try engine.model.grammars.take(toolCalls: tools.map { ($0.name, $0.parameters) }) } catch let error as GenerationSchema.SchemaError {
                throw LanguageModelError.unsupportedSchema(error)
            }
        }()
        defer { if let callGrammar { engine.model.grammars.giveBack(callGrammar.0, key: callGrammar.key) } }
        if mode == .required, callGrammar == nil, format == nil {
            throw LanguageModelError.invalidOptions(option: "toolCallingMode", reason: ".required needs at least one tool")
        }
        // 2. The stateless transform sees a copy (the new prompt included); the stored transcript is untouched.
        let promptEntry = Transcript.Entry.prompt(.init(text: prompt.text, responseFormat: format))
        let seen = transform(stored + [promptEntry], with: profile)
        // 3. Render segment by segment.
        var rendered = engine.renderer.render(components, history: seen, prompt: nil)
        // 5. Check the window before computing anything: the response budget is reserved
        //    (one token when there is no limit).
        let contextSize = engine.contextSize
        let reserved = decoding.budget ?? max(1, decoding.guide?.remaining ?? 1)
        guard rendered.tokens.count + reserved <= contextSize else {
            throw LanguageModelError.contextSizeExceeded(.init(
                contextSize: contextSize, tokenCount: rendered.tokens.count + reserved,
                promptTokenCount: rendered.tokens.count, responseBudget: reserved))
        }
        // 4 and 6. Reuse the common prefix, prefill the rest, decode (running tools on the way).
        let switched = await engine.switchProfile(to: profile.identity)
        var added: [Transcript.Entry] = [promptEntry]
        var usage = Usage()
        var invalidation: InvalidationReport?
        var outcome: RunOutcome
        var round = 0
        let tokenizer = engine.model.tokenizer
        repeat {
            decoding.toolCall = callGrammar.map { GuidedDecoder(masker: $0.0, stopToken: engine.renderer.end) }
            decoding.requiresToolCall = mode == .required && round == 0
            do {
                outcome = try await engine.run(rendered, profileSwitched: switched && round == 0, decoding: decoding,
                                               started: started) { tokens in
                    var snapshotUsage = Usage()
                    snapshotUsage.output.totalTokenCount = tokens.count
                    let raw = format == nil ? GeneratedContent(kind: .string(Self.text(tokens, tokenizer)), isComplete: false)
                        : (try? GeneratedContent.partial(json: tokens.flatMap { tokenizer.bytes(of: $0, after: nil) })) ?? nil
                    if let raw { onSnapshot(.init(raw: raw, usage: snapshotUsage)) }
                }
            } catch let error as RuntimeError {
                throw LanguageModelError.runtime(error)
            }
            if round == 0 {
                usage.input = .init(totalTokenCount: outcome.inputTokens, cachedTokenCount: outcome.reuse.cached)
                usage.input.cachedFromSessionCount = outcome.reuse.kept
                usage.input.cachedFromSharedStoreCount = outcome.reuse.restored.fromMemory
                usage.input.cachedFromDiskCount = outcome.reuse.restored.fromDisk
                invalidation = outcome.reuse.report
                usage.timeToFirstToken = outcome.firstToken ?? started.duration(to: .now)
            }
            usage.computedTokenCount += outcome.computedTokens
            usage.prefillDuration += outcome.prefill
            usage.decodeDuration += outcome.decode
            guard case let .toolCall(callTokens) = outcome.ending, round < Self.maximumToolRounds else { break }
            // A tool call: record it, run the tool, record its output, and let the model continue.
            let call = try Self.parseCall(callTokens, renderer: engine.renderer)
            for hook in profile.toolCallHooks { try await hook(call) }
            let output = Transcript.ToolOutput(toolName: call.toolName, text: try await runTool(call, offered: tools))
            for hook in profile.toolOutputHooks { try await hook(output) }
            added += [.toolCalls(.init(calls: [call], tokenIDs: callTokens)), .toolOutput(output)]
            rendered = engine.renderer.render(components, history: seen + added.dropFirst(), prompt: nil)
            round += 1
        } while true
        usage.output.totalTokenCount = outcome.generated.count
        let text = Self.text(outcome.generated, tokenizer)
        var raw = GeneratedContent(kind: .string(text))
        var structure: Transcript.StructuredSegment?
        if let format, outcome.ending != .contextFull {
            do { raw = try GeneratedContent(json: text) } catch let error as GeneratedContentError {
                throw LanguageModelError.decodingFailure(error)
            }
            structure = .init(source: format.name, content: raw)
        }
        usage.guidedMaskNanoseconds = decoding.guide?.maskNanoseconds ?? []
        let response = Transcript.Response(text: text, tokenIDs: outcome.generated, structure: structure)

        if outcome.ending == .contextFull {
            // The window filled mid-response: the policy decides what the transcript keeps.
            let preserve = state.withLock { $0.policy } == .preserveTranscript
            record(profile: profile, components: components, added: preserve ? added + [.response(response)] : [], usage: usage)
            throw LanguageModelError.contextSizeExceeded(.init(
                contextSize: contextSize, tokenCount: outcome.inputTokens + outcome.generated.count,
                promptTokenCount: outcome.inputTokens, responseBudget: reserved))
        }
        // Run the last token and the closing marker so the cache holds the turn as it will render.
        if try await engine.close(after: outcome.pending) > 0 {
            await engine.publish(rendered, turnEnded: true)   // the turn is complete in the cache: share it
        }
        // 7. Append to the transcript, run onResponse (which may rewrite the history), publish usage.
        let entries = added + [.response(response)]
        record(profile: profile, components: components, added: entries, usage: usage)
        try await runResponseHooks(profile)
        return (Response(content: response.text, rawContent: raw, transcriptEntries: ArraySlice(entries), usage: usage,
                         invalidation: invalidation), raw)
    }

    /// Resolves the active profile and its instructions inside a session context, running
    /// `onPrompt` hooks when asked; hooks may rewrite the stored history.
    private func resolve(runHooks: Bool) async throws -> (Profile, [InstructionComponent], [Transcript.Entry]) {
        let context = SessionContext(history: state.withLock { $0.history })
        let (profile, components) = SessionContext.$current.withValue(context) {
            let profile = source.resolveProfile(path: "")
            return (profile, profile.makeComponents())
        }
        if runHooks {
            for hook in profile.promptHooks { try await SessionContext.$current.withValue(context) { try await hook() } }
            let history = context.history
            changing(\.transcript) { $0.history = history }
        }
        return (profile, components, context.history)
    }

    private func transform(_ history: [Transcript.Entry], with profile: Profile) -> [Transcript.Entry] {
        profile.historyTransforms.reduce(history) { $1($0) }
    }

    private func record(profile: Profile, components: [InstructionComponent], added: [Transcript.Entry], usage: Usage) {
        var texts: [String] = [], tools: [Transcript.ToolDefinition] = []
        for component in components {
            switch component {
            case let .text(t): texts.append(t)
            case let .tool(t): tools.append(t.definition)
            }
        }
        changing(\.transcript) { state in
            state.instructions = .init(texts: texts, toolDefinitions: tools)
            state.history += added
            state.usage = state.usage + usage
        }
    }

    private func runResponseHooks(_ profile: Profile) async throws {
        guard !profile.responseHooks.isEmpty else { return }
        let context = SessionContext(history: state.withLock { $0.history })
        for hook in profile.responseHooks { try await SessionContext.$current.withValue(context) { try await hook() } }
        let history = context.history
        changing(\.transcript) { $0.history = history }
    }

    private func decodingPlan(_ options: GenerationOptions, profile: Profile) throws -> Decoding {
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

    private func runTool(_ call: Transcript.ToolCall, offered: [any Tool]) async throws -> String {
        guard let tool = offered.first(where: { $0.name == call.toolName }) else {
            throw LanguageModelError.toolCallFailed(toolName: call.toolName, reason: "no such tool is offered")
        }
        do { return try await tool.run(call.arguments) } catch {
            throw ToolCallError(tool: tool, underlyingError: error)
        }
    }

    /// `<|tool_call|> name arguments <|end|>` → a call (the arguments are JSON, as the grammar wrote them).
    static func parseCall(_ tokens: [Int], renderer: PromptRenderer) throws -> Transcript.ToolCall {
        let body = renderer.tokenizer.decode(Array(tokens.dropFirst().dropLast()))
            .trimmingCharacters(in: .whitespaces)
        let parts = body.split(separator: " ", maxSplits: 1)
        guard let name = parts.first else { throw LanguageModelError.toolCallFailed(toolName: "", reason: "the call names no tool") }
        do {
            let arguments = try GeneratedContent(json: parts.count > 1 ? String(parts[1]) : "null")
            return Transcript.ToolCall(toolName: String(name), arguments: arguments)
        } catch {
            throw LanguageModelError.toolCallFailed(toolName: String(name), reason: "its arguments are not JSON: \(error)")
        }
    }

    /// Response text: the decoded tokens without the leading space of the first piece.
    static func text(_ tokens: [Int], _ tokenizer: Tokenizer) -> String {
        let text = tokenizer.decode(tokens)
        return text.hasPrefix(" ") ? String(text.dropFirst()) : text
    }
}

/// The snapshots of a streamed response, as an `AsyncSequence`.
public struct ResponseStream<Content: Generable>: AsyncSequence, Sendable {
    /// The response so far.
    public struct Snapshot: Sendable {
        /// The content generated so far, in its partial form (the text so far, for a string;
        /// a value whose unfinished properties are `nil`, for a generable structure).
        public var content: Content.PartiallyGenerated
        /// The content generated so far, as partial ``GeneratedContent``.
        public var rawContent: GeneratedContent
        /// Counts so far (`output.totalTokenCount` grows with each snapshot).
        public var usage: LanguageModelSession.Usage
    }

    let stream: AsyncThrowingStream<Snapshot, any Error>
    let task: Task<LanguageModelSession.Response<Content>, any Error>

    /// Iterates the snapshots.
    public func makeAsyncIterator() -> AsyncThrowingStream<Snapshot, any Error>.Iterator { stream.makeAsyncIterator() }

    /// Waits for the end of the response and returns it.
    public func collect() async throws -> LanguageModelSession.Response<Content> { try await task.value }
}
