import Foundation
import LMRuntime
import Synchronization

/// A loaded model: weights, tokenizer and an identity, shared by every session that uses it.
public final class LoadedModel: Sendable {
    /// The weights.
    public let weights: ModelWeights
    /// The tokenizer.
    public let tokenizer: Tokenizer
    /// A name for reports (config name or checkpoint file).
    public let name: String
    /// The one transformer (and its scratch) every session on this model runs on: passes are
    /// serialised process-wide anyway, so per-session scratch would only cost memory.
    let transformer: Transformer
    /// K/V of prefixes shared by every session on this model (and, with a directory, across
    /// launches): a session whose rendered tokens begin with a stored prefix copies its rows
    /// instead of computing them.
    public let prefixStore: PrefixStore
    /// Compiled schemas and the vocabulary view guided generation uses.
    let grammars: GrammarCache

    /// Bundles weights and a tokenizer.
    /// - Parameters:
    ///   - weights: the model.
    ///   - tokenizer: its tokenizer.
    ///   - name: a name for reports (default: the config's).
    ///   - prefixStore: limits and the optional directory of the shared prefix store (default:
    ///     memory only, or persistent where `KVSESSION_KV_CACHE_DIR` names a directory);
    ///     `.memoryOnly(memoryByteLimit: 0)` turns sharing off.
    /// - Throws: ``LMRuntime/ModelLoadError/vocabularyMismatch(modelVocabSize:tokenizerVocabSize:)``
    ///   when they disagree.
    public init(weights: ModelWeights, tokenizer: Tokenizer, name: String? = nil,
                prefixStore: PrefixStore.Configuration = .standard) throws {
        guard weights.config.vocabSize == tokenizer.vocabSize else {
            throw ModelLoadError.vocabularyMismatch(modelVocabSize: weights.config.vocabSize,
                                                    tokenizerVocabSize: tokenizer.vocabSize)
        }
        self.weights = weights
        self.tokenizer = tokenizer
        self.name = name ?? weights.config.name
        transformer = Transformer(weights: weights)
        grammars = GrammarCache(tokenizer: tokenizer)
        self.prefixStore = PrefixStore(weights: weights, configuration: prefixStore)
    }
}

/// A language model a session can run.
public protocol LanguageModel: Sendable {
    /// Loads (once) and returns the model's weights and tokenizer.
    func loaded() throws -> LoadedModel
}

extension LanguageModel {
    /// The context window, in tokens (0 when the model cannot be loaded; see
    /// ``SystemLanguageModel/availability``).
    public var contextSize: Int { (try? loaded().weights.config.contextLength) ?? 0 }

    /// How many tokens `text` takes (without BOS), as a prompt segment would.
    public func tokenCount(for text: String) throws -> Int { try loaded().tokenizer.encode(text, bos: false).count }

    /// How many tokens a prompt takes where a session renders it: `<|user|> text <|end|>`.
    public func tokenCount(for prompt: Prompt) async throws -> Int {
        let renderer = PromptRenderer(tokenizer: try loaded().tokenizer)
        return renderer.user.count + renderer.text(prompt.text).count + 1
    }

    /// How many tokens instructions take as the first segment of a request: `BOS <|system|> text <|end|>`.
    public func tokenCount(for instructions: Instructions) async throws -> Int {
        let renderer = PromptRenderer(tokenizer: try loaded().tokenizer)
        var out = RenderedPrompt()
        renderer.renderInstructions([.text(instructions.text)], into: &out)
        return out.tokens.count
    }

    /// How many tokens tool definitions add to the instructions.
    public func tokenCount(for tools: [any Tool]) async throws -> Int {
        let renderer = PromptRenderer(tokenizer: try loaded().tokenizer)
        return tools.reduce(0) { $0 + renderer.text(PromptRenderer.describe($1.definition)).count }
    }

    /// How many tokens a schema takes where a guided request renders it after its prompt.
    public func tokenCount(for schema: GenerationSchema) async throws -> Int {
        PromptRenderer(tokenizer: try loaded().tokenizer).schemaTokens(.init(schema: schema)).count
    }

    /// How many tokens transcript entries take as history.
    public func tokenCount(for entries: some Collection<Transcript.Entry>) async throws -> Int {
        let renderer = PromptRenderer(tokenizer: try loaded().tokenizer)
        var out = RenderedPrompt()
        for (i, entry) in entries.enumerated() { renderer.renderEntry(entry, index: i, into: &out) }
        return out.tokens.count
    }
}

/// The on-device model simulation: a bundled config (synthetic weights) or a llama2.c checkpoint.
///
/// Weights load lazily, once, on first use, and are shared by all sessions on the model.
public final class SystemLanguageModel: LanguageModel {
    /// The bundled `base` model (about 100M parameters, 4,096-token context).
    public static let `default` = SystemLanguageModel(named: "base")

    private enum Source: Sendable {
        case bundled(String)
        case checkpoint(URL, tokenizer: URL)
        case loaded(LoadedModel)
    }

    private let source: Source
    private let storeConfiguration: PrefixStore.Configuration
    private let cache = Mutex<Result<LoadedModel, ModelLoadError>?>(nil)

    /// A bundled model by config name (`tiny`, `small`, `base`).
    /// - Parameters:
    ///   - name: the config's name.
    ///   - prefixStore: the shared prefix store's limits and optional directory (see
    ///     ``LoadedModel/init(weights:tokenizer:name:prefixStore:)``).
    public init(named name: String, prefixStore: PrefixStore.Configuration = .standard) {
        source = .bundled(name)
        storeConfiguration = prefixStore
    }

    /// A llama2.c checkpoint and tokenizer.
    public init(checkpoint: URL, tokenizer: URL, prefixStore: PrefixStore.Configuration = .standard) {
        source = .checkpoint(checkpoint, tokenizer: tokenizer)
        storeConfiguration = prefixStore
    }

    /// An already loaded model (with the store it was made with).
    public init(_ model: LoadedModel) {
        source = .loaded(model)
        storeConfiguration = model.prefixStore.configuration
    }

    /// Loads the model on first call; later calls return the same instance.
    /// - Throws: ``LMRuntime/ModelLoadError`` when the model cannot be loaded (and again on every call).
    public func loaded() throws -> LoadedModel {
        if case let .loaded(model) = source { return model }
        let result = cache.withLock { cached -> Result<LoadedModel, ModelLoadError> in
            if let cached { return cached }
            let result = Result { try self.load() }.mapError { $0 as? ModelLoadError ?? .unreadable(path: "\(self.source)", reason: "\($0)") }
            cached = result
            return result
        }
        return try result.get()
    }

    private func load() throws -> LoadedModel {
        switch source {
        case let .bundled(name):
            let catalog = ModelCatalog.bundled
            let config = try catalog.config(named: name)
            return try LoadedModel(weights: catalog.weights(for: config), tokenizer: catalog.tokenizer(for: config),
                                   prefixStore: storeConfiguration)
        case let .checkpoint(model, tokenizer):
            let weights = try ModelWeights.checkpoint(at: model)
            return try LoadedModel(weights: weights, tokenizer: Tokenizer(contentsOf: tokenizer, vocabSize: weights.config.vocabSize),
                                   prefixStore: storeConfiguration)
        case let .loaded(model):
            return model
        }
    }
}
