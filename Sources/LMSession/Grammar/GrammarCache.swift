import LMRuntime

/// Per model: the vocabulary as the constrained decoder sees it (built on first use), and the
/// maskers of recent schemas with their caches, so a schema used again starts warm.
///
/// A masker is lent to one request at a time (``take(_:)``, then ``giveBack(_:key:)``); a
/// request that finds it lent builds its own.
final class GrammarCache: Sendable {
    private let tokenizer: Tokenizer
    /// Behind `Locked`, not `Mutex`: ThreadSanitizer sees an `NSLock`'s ordering (see `Locked`).
    private let slot = Locked<(vocabulary: TokenVocabulary?, maskers: [String: TokenMasker], order: [String])>((nil, [:], []))
    static let schemaLimit = 16

    init(tokenizer: Tokenizer) { self.tokenizer = tokenizer }

    var vocabulary: TokenVocabulary {
        if let v = slot.withLock({ $0.vocabulary }) { return v }
        let built = TokenVocabulary(tokenizer)
        return slot.withLock { s in
            if let v = s.vocabulary { return v }
            s.vocabulary = built
            return built
        }
    }

    /// A masker for `schema` (compiled now if none is cached), and the key to give it back under.
    func take(_ schema: GenerationSchema) throws -> (TokenMasker, key: String) {
        let key = SchemaText.render(schema.root)
        if let m = slot.withLock({ $0.maskers.removeValue(forKey: key) }) { return (m, key) }
        return (TokenMasker(grammar: try SchemaGrammar(schema, vocabulary: vocabulary), vocabulary: vocabulary), key)
    }

    /// A masker for the body of a call to one of `tools`.
    func take(toolCalls tools: [(name: String, parameters: GenerationSchema)],
              format: PromptRenderer.CallFormat) throws -> (TokenMasker, key: String) {
        let key = "tool calls (\(format)): " + tools.map { "\($0.name) \(SchemaText.render($0.parameters.root))" }.joined(separator: "; ")
        if let m = slot.withLock({ $0.maskers.removeValue(forKey: key) }) { return (m, key) }
        return (TokenMasker(grammar: try SchemaGrammar(toolCalls: tools, format: format, vocabulary: vocabulary), vocabulary: vocabulary), key)
    }

    func giveBack(_ masker: TokenMasker, key: String) {
        slot.withLock { s in
            s.order.removeAll { $0 == key }
            s.order.append(key)
            s.maskers[key] = masker
            while s.order.count > Self.schemaLimit { s.maskers[s.order.removeFirst()] = nil }
        }
    }
}
