import Foundation
import LMRuntime

extension LanguageModelSession {
    /// Responds to `prompt`.
    /// - Parameters:
    ///   - prompt: the prompt.
    ///   - options: sampling and length; unset fields come from the profile, then the defaults
    ///     (greedy, no length limit).
    ///   - contextOptions: how the request is put to the model: its `reasoningLevel` (else the
    ///     profile's) has the model reason before it responds (see ``ContextOptions``).
    ///   - metadata: kept on the request's prompt entry (``Transcript/Prompt/metadata``); it
    ///     renders nothing, so it never moves the cache.
    /// - Returns: the response with its usage and invalidation report.
    /// - Throws: ``LanguageModelError/contextSizeExceeded(_:)`` before computing anything when the
    ///   prompt plus the response budget does not fit, ``LanguageModelSession/Error/concurrentRequests``,
    ///   `CancellationError`. A request that throws leaves the transcript as it was (except as
    ///   ``transcriptErrorHandlingPolicy`` says for a response cut off mid-way) and the cache exact.
    public func respond(to prompt: Prompt, options: GenerationOptions = GenerationOptions(),
                        contextOptions: ContextOptions = ContextOptions(),
                        metadata: [String: any ConvertibleToGeneratedContent] = [:]) async throws -> Response<String> {
        try await perform(prompt, options: options, format: nil, reasoningLevel: contextOptions.reasoningLevel,
                          metadata: Self.content(metadata)).response
    }

    /// Responds to a prompt given as a string.
    public func respond(to prompt: String, options: GenerationOptions = GenerationOptions(),
                        contextOptions: ContextOptions = ContextOptions(),
                        metadata: [String: any ConvertibleToGeneratedContent] = [:]) async throws -> Response<String> {
        try await respond(to: Prompt(prompt), options: options, contextOptions: contextOptions, metadata: metadata)
    }

    /// Streams the response to `prompt` as growing snapshots; ``ResponseStream/collect()``
    /// gives the final ``Response``. Cancelling the consuming task cancels generation.
    public func streamResponse(to prompt: Prompt, options: GenerationOptions = GenerationOptions(),
                               contextOptions: ContextOptions = ContextOptions(),
                               metadata: [String: any ConvertibleToGeneratedContent] = [:]) -> ResponseStream<String> {
        stream(prompt, options: options, format: nil, reasoningLevel: contextOptions.reasoningLevel, metadata: Self.content(metadata))
    }

    /// Streams the response to a prompt given as a string.
    public func streamResponse(to prompt: String, options: GenerationOptions = GenerationOptions(),
                               contextOptions: ContextOptions = ContextOptions(),
                               metadata: [String: any ConvertibleToGeneratedContent] = [:]) -> ResponseStream<String> {
        streamResponse(to: Prompt(prompt), options: options, contextOptions: contextOptions, metadata: metadata)
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

    // MARK: - Prewarming (steps 1–6, prefill only)

    private func performPrewarm(_ prefix: Prompt?) async throws {
        let engine = try engine()
        let plan = try await plan(nil, runHooks: false, renderer: engine.renderer, header: false)
        var rendered = plan.rendered
        if let prefix { engine.renderer.renderPromptPrefix(prefix.text, into: &rendered) }
        guard rendered.tokens.count <= engine.contextSize else { return }
        let switched = await engine.switchProfile(to: plan.profile.identity)
        let result = try await engine.prefill(rendered, profileSwitched: switched)
        changing(\.usage) { $0.usage.computedTokenCount += result.computed; $0.usage.prefillDuration += result.duration }
    }
}
