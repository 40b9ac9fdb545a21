import Foundation
import LMRuntime

/// The on-device model simulation: a bundled config (synthetic weights), a llama2.c checkpoint or a GGUF file.
///
/// Weights load lazily, once, on first use, and are shared by all sessions on the model.
public final class SystemLanguageModel: LanguageModel {
    /// The bundled `base` model (about 100M parameters, 4,096-token context).
    public static let `default` = SystemLanguageModel(named: "base")

    /// Where the weights come from; `nil` for a model made from a ``LoadedModel`` (whose load is done).
    private let source: (any WeightSource)?
    private let storeConfiguration: PrefixStore.Configuration
    private let precision: WeightPrecision?
    /// Merged into the float32 weights when they load, before ``precision`` applies.
    let adapter: Adapter?
    private let cache: Locked<Result<Loaded, ModelLoadError>?>
    /// The base fingerprint of a GGUF read straight into halfs, once asked for.
    private let deferredFingerprint = Locked<Result<ModelFingerprint, ModelLoadError>?>(nil)

    /// The loaded model and the fingerprint of its float32 weights before any adapter (`nil` for a
    /// GGUF read straight into halfs, whose fingerprint is taken when asked for).
    private struct Loaded: Sendable {
        let model: LoadedModel
        let baseFingerprint: ModelFingerprint?
    }

    /// A model by config name: a bundled one (`tiny`, `small`, `base`), or one of another catalog's.
    /// - Parameters:
    ///   - name: the config's name.
    ///   - catalog: the folder of configs; by default the package's `Models/` (``LMRuntime/ModelCatalog/bundled``).
    ///   - adapter: an adapter to merge into the weights (see ``Adapter``); `nil` for none.
    ///   - weightPrecision: how to keep the weights (``LMRuntime/WeightPrecision``); `nil` keeps
    ///     the config's own (float32 unless it says otherwise).
    ///   - prefixStore: the shared prefix store's limits and optional directory (see
    ///     ``LoadedModel/init(weights:tokenizer:name:prefixStore:)``).
    public init(named name: String, in catalog: ModelCatalog = .bundled, adapter: Adapter? = nil,
                weightPrecision: WeightPrecision? = nil, prefixStore: PrefixStore.Configuration = .standard) {
        source = CatalogSource(catalog: catalog, name: name)
        cache = Locked(nil)
        self.adapter = adapter
        precision = weightPrecision
        storeConfiguration = prefixStore
    }

    /// A llama2.c checkpoint and tokenizer, its weights kept in `weightPrecision` (default float32),
    /// with `adapter` merged when given.
    public init(checkpoint: URL, tokenizer: URL, adapter: Adapter? = nil, weightPrecision: WeightPrecision? = nil,
                prefixStore: PrefixStore.Configuration = .standard) {
        source = CheckpointSource(file: checkpoint, tokenizer: tokenizer)
        cache = Locked(nil)
        self.adapter = adapter
        precision = weightPrecision
        storeConfiguration = prefixStore
    }

    /// A GGUF (version 3) `llama` or `qwen2` model with the vocabulary stored in it
    /// (see ``LMRuntime/ModelWeights/gguf(at:precision:contextLength:memoryLimit:)`` for what is read), its weights kept
    /// in `weightPrecision` (default float32, whatever the file's tensor types), with `adapter`
    /// merged when given.
    /// - Parameter contextLength: the most positions of context to give the model, when fewer than
    ///   the file declares (``contextSize`` is then this); `nil` for the file's own. The fingerprint
    ///   stays the whole model's, so the prefix store and adapters are shared with it.
    public init(gguf: URL, adapter: Adapter? = nil, weightPrecision: WeightPrecision? = nil, contextLength: Int? = nil,
                prefixStore: PrefixStore.Configuration = .standard) {
        source = GGUFSource(file: gguf, contextLength: contextLength)
        cache = Locked(nil)
        self.adapter = adapter
        precision = weightPrecision
        storeConfiguration = prefixStore
    }

    /// An already loaded model (with the store it was made with).
    public init(_ model: LoadedModel) {
        source = nil
        cache = Locked(.success(Loaded(model: model, baseFingerprint: model.prefixStore.fingerprint)))
        adapter = nil
        precision = nil
        storeConfiguration = model.prefixStore.configuration
    }

    /// Loads the model on first call; later calls return the same instance.
    /// - Throws: ``LMRuntime/ModelLoadError`` when the model cannot be loaded (and again on every call).
    public func loaded() throws -> LoadedModel { try loadedOnce().model }

    /// The fingerprint of the model's float32 weights before any adapter: what an adapter made
    /// for this model records (``LMRuntime/LowRankAdapter/baseFingerprint``). Loads the model. For
    /// a model made from a ``LoadedModel``, that model's own fingerprint. A GGUF model (a file, or
    /// a config naming one) kept in halfs without an adapter never held float32 weights:
    /// the first call reads the file again in float32 for this, then lets them go.
    public func baseFingerprint() throws -> ModelFingerprint {
        if let known = try loadedOnce().baseFingerprint { return known }
        return try deferredFingerprint.withLock { known -> Result<ModelFingerprint, ModelLoadError> in
            if let known { return known }
            let result = Result { () throws(ModelLoadError) in ModelFingerprint(try float32Weights()) }
            known = result
            return result
        }.get()
    }

    /// The source's weights in float32, read again: for a model whose load read them straight into halfs.
    private func float32Weights() throws(ModelLoadError) -> ModelWeights {
        guard let source else { preconditionFailure("a model made from a LoadedModel has its fingerprint") }
        do {
            return try source.float32Weights()
        } catch let error as ModelLoadError { throw error } catch {
            throw .unreadable(path: source.path, reason: "\(error)")
        }
    }

    private func loadedOnce() throws(ModelLoadError) -> Loaded {
        let result = cache.withLock { cached -> Result<Loaded, ModelLoadError> in
            if let cached { return cached }
            let result = Result { try self.load() }.mapError { $0 as? ModelLoadError ?? .unreadable(path: self.source?.path ?? "", reason: "\($0)") }
            cached = result
            return result
        }
        return try result.get()
    }

    /// Reads the float32 weights, fingerprints them, merges the adapter, then converts (a GGUF
    /// kept in halfs without an adapter is read straight into them: no float32 model in memory).
    private func load() throws -> Loaded {
        guard let source else { preconditionFailure("a model made from a LoadedModel starts loaded") }
        let (weights, tokenizer, wanted) = try source.read(precision: precision, halfsDirectly: adapter == nil)
        if weights.precision != .f32 {   // read straight into halfs
            return Loaded(model: try LoadedModel(weights: weights, tokenizer: tokenizer, prefixStore: storeConfiguration), baseFingerprint: nil)
        }
        let base = ModelFingerprint(weights)
        let adapted = try adapter.map { try weights.merging($0.lowRank) } ?? weights
        return Loaded(model: try LoadedModel(weights: adapted.converted(to: wanted), tokenizer: tokenizer, prefixStore: storeConfiguration),
                      baseFingerprint: base)
    }
}

/// Where a ``SystemLanguageModel``'s weights come from: a catalog's config, a checkpoint or a GGUF file.
///
/// A protocol with a type per source rather than an enum with payloads: a multi-payload enum keeps
/// its case in the spare bits of its payload's first pointer, which LeakSanitizer cannot follow, so
/// a model a static held (``SystemLanguageModel/default`` is one) was reported as leaked.
private protocol WeightSource: Sendable {
    /// The file or config the weights come from, for errors.
    var path: String { get }
    /// The weights and vocabulary, and the precision to keep the weights in (`precision`, or the
    /// source's own). The weights are float32, or that precision already when `halfsDirectly` allows
    /// it and the source can read straight into halfs.
    func read(precision: WeightPrecision?, halfsDirectly: Bool) throws -> (ModelWeights, Tokenizer, wanted: WeightPrecision)
    /// The weights in float32, read again.
    func float32Weights() throws -> ModelWeights
}

/// A config of a ``ModelCatalog``: synthetic weights, a checkpoint or a GGUF file it names.
private struct CatalogSource: WeightSource {
    let catalog: ModelCatalog
    let name: String

    var path: String { catalog.directory.appendingPathComponent("\(name).json").path }

    func read(precision: WeightPrecision?, halfsDirectly: Bool) throws -> (ModelWeights, Tokenizer, wanted: WeightPrecision) {
        var config = try catalog.config(named: name)
        let wanted = precision ?? config.weightPrecision
        let isGGUF = if case .gguf = config.weights { true } else { false }
        config.weightPrecision = isGGUF && halfsDirectly && wanted == .f16 ? wanted : .f32
        let (weights, tokenizer) = try catalog.model(for: config)   // a GGUF file parsed once for both
        return (weights, tokenizer, wanted)
    }

    func float32Weights() throws -> ModelWeights {
        var config = try catalog.config(named: name)
        config.weightPrecision = .f32
        return try catalog.weights(for: config)
    }
}

/// A llama2.c checkpoint and `tokenizer.bin`.
private struct CheckpointSource: WeightSource {
    let file: URL
    let tokenizer: URL

    var path: String { file.path }

    func read(precision: WeightPrecision?, halfsDirectly: Bool) throws -> (ModelWeights, Tokenizer, wanted: WeightPrecision) {
        let weights = try ModelWeights.checkpoint(at: file)
        return (weights, try Tokenizer(contentsOf: tokenizer, vocabSize: weights.config.vocabSize), precision ?? .f32)
    }

    func float32Weights() throws -> ModelWeights { try ModelWeights.checkpoint(at: file) }
}

/// A GGUF file with its vocabulary, parsed once for both.
private struct GGUFSource: WeightSource {
    let file: URL
    let contextLength: Int?

    var path: String { file.path }

    func read(precision: WeightPrecision?, halfsDirectly: Bool) throws -> (ModelWeights, Tokenizer, wanted: WeightPrecision) {
        let wanted = precision ?? .f32
        let parsed = try GGUFFile(contentsOf: file)
        let weights = try ModelWeights.gguf(parsed, path: file.path, precision: halfsDirectly && wanted == .f16 ? wanted : .f32,
                                            contextLength: contextLength)
        return (weights, try Tokenizer(gguf: parsed, path: file.path), wanted)
    }

    func float32Weights() throws -> ModelWeights {
        try ModelWeights.gguf(at: file, precision: .f32, contextLength: contextLength)
    }
}
