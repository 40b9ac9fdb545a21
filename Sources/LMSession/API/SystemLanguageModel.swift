import Foundation
import LMRuntime
import Synchronization

/// The on-device model simulation: a bundled config (synthetic weights), a llama2.c checkpoint or a GGUF file.
///
/// Weights load lazily, once, on first use, and are shared by all sessions on the model.
public final class SystemLanguageModel: LanguageModel {
    /// The bundled `base` model (about 100M parameters, 4,096-token context).
    public static let `default` = SystemLanguageModel(named: "base")

    private enum Source: Sendable {
        case bundled(String)
        case checkpoint(URL, tokenizer: URL)
        case gguf(URL)
        case loaded(LoadedModel)
    }

    private let source: Source
    private let storeConfiguration: PrefixStore.Configuration
    private let precision: WeightPrecision?
    private let cache = Mutex<Result<LoadedModel, ModelLoadError>?>(nil)

    /// A bundled model by config name (`tiny`, `small`, `base`).
    /// - Parameters:
    ///   - name: the config's name.
    ///   - weightPrecision: how to keep the weights (``LMRuntime/WeightPrecision``); `nil` keeps
    ///     the config's own (float32 unless it says otherwise).
    ///   - prefixStore: the shared prefix store's limits and optional directory (see
    ///     ``LoadedModel/init(weights:tokenizer:name:prefixStore:)``).
    public init(named name: String, weightPrecision: WeightPrecision? = nil, prefixStore: PrefixStore.Configuration = .standard) {
        source = .bundled(name)
        precision = weightPrecision
        storeConfiguration = prefixStore
    }

    /// A llama2.c checkpoint and tokenizer, its weights kept in `weightPrecision` (default float32).
    public init(checkpoint: URL, tokenizer: URL, weightPrecision: WeightPrecision? = nil,
                prefixStore: PrefixStore.Configuration = .standard) {
        source = .checkpoint(checkpoint, tokenizer: tokenizer)
        precision = weightPrecision
        storeConfiguration = prefixStore
    }

    /// A GGUF (version 3) `llama` model with the vocabulary stored in it
    /// (see ``LMRuntime/ModelWeights/gguf(at:memoryLimit:)`` for what is read), its weights kept
    /// in `weightPrecision` (default float32, whatever the file's tensor types).
    public init(gguf: URL, weightPrecision: WeightPrecision? = nil, prefixStore: PrefixStore.Configuration = .standard) {
        source = .gguf(gguf)
        precision = weightPrecision
        storeConfiguration = prefixStore
    }

    /// An already loaded model (with the store it was made with).
    public init(_ model: LoadedModel) {
        source = .loaded(model)
        precision = nil
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
            var config = try catalog.config(named: name)
            config.weightPrecision = precision ?? config.weightPrecision
            return try LoadedModel(weights: catalog.weights(for: config), tokenizer: catalog.tokenizer(for: config),
                                   prefixStore: storeConfiguration)
        case let .checkpoint(model, tokenizer):
            let weights = try ModelWeights.checkpoint(at: model).converted(to: precision ?? .f32)
            return try LoadedModel(weights: weights, tokenizer: Tokenizer(contentsOf: tokenizer, vocabSize: weights.config.vocabSize),
                                   prefixStore: storeConfiguration)
        case let .gguf(file):
            return try LoadedModel(weights: ModelWeights.gguf(at: file).converted(to: precision ?? .f32), tokenizer: Tokenizer(ggufAt: file),
                                   prefixStore: storeConfiguration)
        case let .loaded(model):
            return model
        }
    }
}
