/// Why a generation ended.
public enum StopReason: String, Sendable, Equatable, Codable {
    /// The model produced a stop token (not included in the output).
    case stopToken
    /// The requested number of new tokens was produced.
    case maxTokens
    /// The cache reached its capacity.
    case contextFull
}

/// The tokens of one generation.
public struct Generation: Sendable, Equatable {
    /// The prompt as it was fed to the model.
    public var promptTokens: [Int]
    /// The tokens produced, stop token excluded.
    public var generatedTokens: [Int]
    /// Why generation ended.
    public var stopReason: StopReason
}

extension Transformer {
    /// Prefills `prompt` in one batched pass, then decodes one token at a time.
    ///
    /// Like llama2.c, generation stops when a stop token is sampled (by default
    /// BOS, which is what llama2.c stops on), after `maxNewTokens`, or when the cache is full.
    /// - Parameters:
    ///   - prompt: token ids (usually beginning with BOS).
    ///   - maxNewTokens: the most tokens to produce.
    ///   - sampler: chooses each token.
    ///   - cache: receives the K/V rows; it may already hold a prefix of the sequence.
    ///   - stopTokens: ids that end generation: llama2.c's BOS by default; pass the
    ///     vocabulary's ``Tokenizer/stopTokens`` to stop on its EOS as well.
    ///   - onToken: called with each produced token as soon as it is chosen.
    /// - Throws: ``RuntimeError`` for bad ids or a prompt that does not fit.
    public func generate(prompt: [Int], maxNewTokens: Int, sampler: inout Sampler, cache: some KVCache,
                         stopTokens: Set<Int> = [Tokenizer.bos],
                         onToken: (Int) -> Void = { _ in }) throws -> Generation {
        var logits = try forward(prompt, cache: cache)
        var produced: [Int] = []
        let capacity = min(cache.capacity, config.contextLength)
        while true {
            guard produced.count < maxNewTokens else { return Generation(promptTokens: prompt, generatedTokens: produced, stopReason: .maxTokens) }
            let next = sampler.sample(logits)
            if stopTokens.contains(next) {
                return Generation(promptTokens: prompt, generatedTokens: produced, stopReason: .stopToken)
            }
            produced.append(next)
            onToken(next)
            guard produced.count < maxNewTokens else { continue }
            guard cache.count < capacity else {
                return Generation(promptTokens: prompt, generatedTokens: produced, stopReason: .contextFull)
            }
            logits = try forward([next], cache: cache)
        }
    }
}
