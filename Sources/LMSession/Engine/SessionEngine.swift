import LMRuntime

/// What one model run produced.
struct RunOutcome: Sendable {
    enum Ending: Sendable, Equatable {
        /// A stop marker was sampled or the budget was used.
        case finished
        /// The model wrote a tool call (tokens from `<|tool_call|>` through `<|end|>`).
        case toolCall([Int])
        /// The context window filled before the response ended.
        case contextFull
    }

    var reuse: PrefixReuse
    var inputTokens: Int
    var computedTokens: Int
    var generated: [Int]
    var ending: Ending
    var prefill: Duration
    var firstToken: Duration?
    var decode: Duration
    /// The last generated token when it has not been run through the model yet.
    var pending: Int?
}

/// How one run picks tokens.
struct Decoding: Sendable {
    var strategy: SamplingStrategy
    var seed: UInt64
    /// The most tokens to generate; `nil` runs until a stop marker or the window.
    var budget: Int?
    /// A test and demo seam: returns a token to force at step `index` (given the tokens
    /// generated so far), or `nil` to sample.
    var steering: (@Sendable (_ generated: [Int]) -> Int?)?
    /// Whether `<|tool_call|>` starts a call (only when the request offers tools).
    var toolsOffered: Bool
    /// Constrains every token to a schema (guided generation); `nil` for free text.
    var guide: GuidedDecoder? = nil
    /// Constrains a tool call's body (a name, then arguments under that tool's schema);
    /// `nil` when no call may be made.
    var toolCall: GuidedDecoder? = nil
    /// Forces the response to open with a tool call (`ToolCallingMode.required`).
    var requiresToolCall = false
    /// A token that ends the run besides the renderer's stop tokens (`</think>` for reasoning).
    var stopToken: Int? = nil
}

/// A session's KV cache and renderer, run on its model's shared transformer; requests run
/// here one at a time.
///
/// Invariant: the cache always equals a fresh prefill of its own tokens (every mutation
/// is a truncation or a forward pass), whatever errors or cancellations happen.
///
/// Memory follows use: the cache grows in chunks of ``cacheChunk`` positions, and the
/// transformer's scratch belongs to the model, not the session.
actor SessionEngine {
    let model: LoadedModel
    let cache: GrowingKVCache
    let renderer: PromptRenderer
    var transformer: Transformer { model.transformer }
    /// The last pass's next-token logits, `[1, vocabSize]` (the shared transformer's own are
    /// overwritten by other sessions' passes).
    private let logits: Matrix
    private var profileIdentity: String?
    /// The instructions and tool definitions of the last request, as tokens (what ``pinPreamble(_:)`` pins).
    private var preamble: [Int] = []
    private let clock = ContinuousClock()

    /// Positions the cache grows by: 256 × 24 KiB = 6 MiB on `base`, a short exchange's worth.
    static let cacheChunk = 256

    init(model: LoadedModel) {
        self.model = model
        let c = model.weights.config
        cache = GrowingKVCache(layerCount: c.layerCount, kvDim: c.kvDim, capacity: c.contextLength,
                               chunkPositions: Self.cacheChunk)
        logits = .zeros(rows: 1, cols: c.vocabSize)
        renderer = PromptRenderer(tokenizer: model.tokenizer, texts: model.texts)
    }

    nonisolated var contextSize: Int { model.weights.config.contextLength }
    var cachedTokens: [Int] { cache.tokens }

    /// Records the active profile; returns whether it differs from the previous request's.
    func switchProfile(to identity: String) -> Bool {
        defer { profileIdentity = identity }
        return profileIdentity.map { $0 != identity } ?? false
    }

    /// Brings the cache to `tokens` by reusing the common prefix and prefilling the rest (prewarm),
    /// then publishes what it computed.
    func prefill(_ rendered: RenderedPrompt, profileSwitched: Bool) throws -> (reuse: PrefixReuse, computed: Int, duration: Duration) {
        let reuse = reuse(rendered, profileSwitched: profileSwitched, needsLogits: false)
        let suffix = Array(rendered.tokens[cache.count...])
        let duration = try clock.measure { if !suffix.isEmpty { try transformer.forward(suffix, cache: cache, logits: logits) } }
        publish(rendered, turnEnded: false)
        return (reuse, suffix.count, duration)
    }

    /// Step 4: keeps the longest common prefix of the cache, then extends it from the model's
    /// shared prefix store (memory, then disk) where that holds more of the rendered tokens.
    private func reuse(_ rendered: RenderedPrompt, profileSwitched: Bool, needsLogits: Bool) -> PrefixReuse {
        var reuse = PrefixReuse.plan(rendered, cache: cache, profileSwitched: profileSwitched, needsLogits: needsLogits)
        cache.truncate(to: reuse.kept)
        let usable = needsLogits ? rendered.tokens.count - 1 : rendered.tokens.count
        reuse.record(model.prefixStore.restore(into: cache, tokens: rendered.tokens,
                                               boundaries: rendered.boundaries.filter { $0 <= usable }))
        return reuse
    }

    /// Publishes the cache to the shared store at the end of the instructions and of each
    /// response `rendered` holds, and, when a turn has just ended, at `end` (`nil`: the cache's end).
    func publish(_ rendered: RenderedPrompt, turnEnded: Bool, upTo end: Int? = nil) {
        preamble = Array(rendered.tokens.prefix(rendered.preambleEnd))
        let boundaries = rendered.publishBoundaries + (turnEnded ? [end ?? cache.count] : [])
        model.prefixStore.publish(cache, boundaries: boundaries.filter { $0 <= cache.count })
    }

    /// Reuses the cache for `rendered`, prefills the rest, then decodes until a stop marker,
    /// a tool call, the budget, or the context window. Checks for cancellation between tokens.
    func run(_ rendered: RenderedPrompt, profileSwitched: Bool, decoding: Decoding, started: ContinuousClock.Instant,
             onToken: @Sendable ([Int]) -> Void) throws -> RunOutcome {
        let reuse = reuse(rendered, profileSwitched: profileSwitched, needsLogits: true)
        let suffix = Array(rendered.tokens[cache.count...])
        let prefill = try clock.measure { try transformer.forward(suffix, cache: cache, logits: logits) }
        var outcome = RunOutcome(reuse: reuse, inputTokens: rendered.tokens.count, computedTokens: suffix.count,
                                 generated: [], ending: .finished, prefill: prefill, firstToken: nil, decode: .zero, pending: nil)
        var sampler = try Sampler(decoding.strategy, seed: decoding.seed)
        let decodeStart = clock.now
        var callStart: Int?
        let budget = decoding.budget ?? Int.max
        let limit = min(cache.capacity, contextSize)
        while budget > 0 {
            try Task.checkCancellation()
            let left = min(budget - outcome.generated.count, limit - cache.count + 1)
            // Where a JSON object opening the response is the call (Llama 3), `.required` opens one at once.
            if renderer.callOpensWithJSON, callStart == nil, decoding.requiresToolCall, outcome.generated.isEmpty { callStart = 0 }
            // Guided generation and tool calls: mask the logits to the tokens that keep the value (or
            // the call) valid and finishable within what is left of the budget and the window.
            let guide = callStart == nil ? decoding.guide : decoding.toolCall
            var next: Int
            if callStart != nil, decoding.toolCall?.isFinished == true {
                next = renderer.callEnd   // the arguments are complete: the call closes
            } else if callStart == nil, decoding.requiresToolCall, outcome.generated.isEmpty, let open = renderer.toolCall {
                next = open
            } else {
                let open = callStart == nil && decoding.toolsOffered ? renderer.toolCall : nil
                let openLogit = open.map { logits[0, $0] }
                guide?.constrain(logits, budget: callStart == nil ? left : left - 1)
                if let open {
                    // A call opens where text may go on, or before a structured value starts; only
                    // when tools are offered and there is room to finish it.
                    let room = decoding.toolCall.map { left >= renderer.callMarkerCount + $0.remaining } ?? false
                    let valueStarted = decoding.guide != nil && !outcome.generated.isEmpty
                    logits[0, open] = room && !valueStarted ? openLogit! : -.infinity
                }
                let steered = decoding.steering?(outcome.generated)
                next = choose(steered, guide: guide, sampler: &sampler)
                // Where no token opens a call, a first token that starts a JSON object makes the
                // response a call (not beside a structured value, which starts so too; only with room
                // to finish it): that token is chosen again, under the call's grammar.
                if renderer.callOpensWithJSON, callStart == nil, outcome.generated.isEmpty, decoding.guide == nil,
                   let call = decoding.toolCall, left >= renderer.callMarkerCount + call.remaining, renderer.opensJSONObject(next) {
                    callStart = 0
                    call.constrain(logits, budget: left - 1)
                    next = choose(steered, guide: call, sampler: &sampler)
                }
            }
            if outcome.firstToken == nil { outcome.firstToken = started.duration(to: clock.now) }
            if next == renderer.toolCall, callStart == nil, decoding.toolsOffered { callStart = outcome.generated.count }
            if let start = callStart, next == renderer.callEnd {
                outcome.ending = .toolCall(Array(outcome.generated[start...]) + [next])
                outcome.generated.removeSubrange(start...)
                break
            }
            if renderer.stopTokens.contains(next) || next == decoding.stopToken { break }
            outcome.generated.append(next)
            if callStart == nil { onToken(outcome.generated) }
            if let start = callStart, outcome.generated.count - 1 >= start + (renderer.callOpensWithJSON ? 0 : 1) {   // past any opening tag
                decoding.toolCall?.accept(next)
            } else if callStart == nil, let guide = decoding.guide {
                guide.accept(next)
                if guide.isFinished { outcome.pending = next; break }
            }
            // The budget covers every generated token, an unfinished tool call's included (it then
            // stays in the response). The last token is not run here: close(after:) runs it.
            if outcome.generated.count >= budget { outcome.pending = next; break }
            guard cache.count < limit else {
                outcome.pending = next
                outcome.ending = .contextFull
                break
            }
            try transformer.forward([next], cache: cache, logits: logits)
        }
        outcome.decode = decodeStart.duration(to: clock.now)
        return outcome
    }

    /// The next token: the steered one unless the mask refused it (an id outside the vocabulary
    /// is taken too where nothing guides: the forward pass rejects it with a typed error), else a sample.
    private func choose(_ steered: Int?, guide: GuidedDecoder?, sampler: inout Sampler) -> Int {
        if let forced = steered,
           (0 ..< logits.cols).contains(forced) ? logits[0, forced] > -.infinity : guide == nil {
            return forced
        }
        return sampler.sample(logits)
    }

    /// Pins (or unpins) the last request's instructions and tool definitions in the shared store.
    func pinPreamble(_ pin: Bool) -> Bool {
        guard !preamble.isEmpty else { return false }
        return pin ? model.prefixStore.pin(preamble) : model.prefixStore.unpin(preamble)
    }

    /// Runs the response's closing tokens (`last`, then the turn's close: `<|end|>`, or ChatML's
    /// `<|im_end|>` and newline) so the cache holds the whole turn, exactly as the next request
    /// renders it. Returns the tokens computed.
    func close(after last: Int?) throws -> Int {
        let tail = (last.map { [$0] } ?? []) + renderer.close
        guard cache.count + tail.count <= min(cache.capacity, contextSize) else { return 0 }
        try transformer.forward(tail, cache: cache, logits: logits)
        return tail.count
    }
}
