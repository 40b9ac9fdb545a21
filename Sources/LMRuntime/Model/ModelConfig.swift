import Foundation

/// The shape of a Llama-architecture model and where its weights and tokenizer come from.
///
/// Read from `Models/NAME.json` or from a llama2.c checkpoint header. Every
/// other file names dimensions through these properties.
public struct ModelConfig: Codable, Sendable, Equatable {
    /// Short name (`tiny`, `small`, `base`, or the checkpoint's file name).
    public var name: String
    /// Width of the residual stream.
    public var dim: Int
    /// Width of the SwiGLU hidden layer.
    public var hiddenDim: Int
    /// Number of transformer blocks.
    public var layerCount: Int
    /// Number of query heads.
    public var headCount: Int
    /// Number of key/value heads (grouped-query attention when fewer than `headCount`).
    public var kvHeadCount: Int
    /// Vocabulary size.
    public var vocabSize: Int
    /// Maximum sequence length (positions) this runtime gives the model: the K/V it may hold,
    /// its RoPE tables and a session's context window. The model's own, unless it was loaded with
    /// a shorter one (``limitingContext(to:)``).
    public var contextLength: Int
    /// The context length the model's file declares, when it was loaded with a shorter
    /// ``contextLength`` (``limitingContext(to:)``); `nil` when the two are the same (JSON key
    /// `trainedContextLength`, written only when set). Nothing a model computes depends on it:
    /// the model fingerprint hashes the config with this length in place of ``contextLength``, so
    /// a limited model shares cached K/V and adapters with the whole one, and writers record it.
    public var trainedContextLength: Int?
    /// RMSNorm epsilon.
    public var normEpsilon: Float
    /// RoPE base frequency.
    public var ropeTheta: Float
    /// Whether the classifier reuses the token embedding matrix.
    public var sharedClassifier: Bool
    /// Tokenizer file, relative to the config's folder (`nil` when the caller supplies one).
    public var tokenizer: String?
    /// Where the weights come from.
    public var weights: WeightSource
    /// How the weight matrices are kept in memory (default `.f32`; JSON key `weightPrecision`,
    /// written only when it is not `f32`). Loaders read float32 and convert (see
    /// ``ModelWeights/converted(to:memoryLimit:)``).
    public var weightPrecision: WeightPrecision
    /// The ``LowRankAdapter/identity`` of the adapter merged into the weights, if any (JSON key
    /// `adapter`, written only when set): a merged model's fingerprint differs from its base's
    /// because of it, whatever the adapter's values.
    public var adapter: String?
    /// Llama 3.1's RoPE frequency divisors, one per rotated pair (`headDim / 2`): frequency `i`
    /// is `ropeTheta^(-2i / headDim) / ropeFrequencyFactors[i]`, which stretches the long
    /// wavelengths for long contexts (GGUF tensor `rope_freqs.weight`; JSON key
    /// `ropeFrequencyFactors`, written only when set). `nil`: plain RoPE.
    public var ropeFrequencyFactors: [Float]?
    /// Whether the Q, K and V projections add a bias (Qwen2; GGUF `blk.N.attn_q.bias` and the
    /// like; JSON key `attentionBias`, written only when true).
    public var attentionBias = false

    /// The origin of a model's weights.
    public enum WeightSource: Codable, Sendable, Equatable {
        /// Generated from `seed` by ``SeededGenerator``: identical on every machine.
        case synthetic(seed: UInt64)
        /// A llama2.c checkpoint file, relative to the config's folder or absolute.
        case checkpoint(path: String)
        /// A GGUF file (``ModelWeights/gguf(at:precision:contextLength:memoryLimit:)``), relative to the config's folder or absolute.
        case gguf(path: String)
    }

    /// Elements per attention head.
    public var headDim: Int { dim / headCount }
    /// Width of one K (or V) row: `kvHeadCount * headDim`.
    public var kvDim: Int { kvHeadCount * headDim }

    /// A config with the given dimensions.
    public init(name: String, dim: Int, hiddenDim: Int, layerCount: Int, headCount: Int, kvHeadCount: Int,
                vocabSize: Int, contextLength: Int, normEpsilon: Float = 1e-5, ropeTheta: Float = 10000,
                sharedClassifier: Bool = true, tokenizer: String? = nil, weights: WeightSource = .synthetic(seed: 0),
                weightPrecision: WeightPrecision = .f32) {
        self.name = name
        self.dim = dim
        self.hiddenDim = hiddenDim
        self.layerCount = layerCount
        self.headCount = headCount
        self.kvHeadCount = kvHeadCount
        self.vocabSize = vocabSize
        self.contextLength = contextLength
        self.normEpsilon = normEpsilon
        self.ropeTheta = ropeTheta
        self.sharedClassifier = sharedClassifier
        self.tokenizer = tokenizer
        self.weights = weights
        self.weightPrecision = weightPrecision
    }

    private enum CodingKeys: String, CodingKey {
        case name, dim, hiddenDim, layerCount, headCount, kvHeadCount, vocabSize, contextLength
        case normEpsilon, ropeTheta, sharedClassifier, tokenizer, weights, weightPrecision, adapter, ropeFrequencyFactors, attentionBias
        case trainedContextLength
    }

    /// Decodes a config; `normEpsilon`, `ropeTheta`, `sharedClassifier`, `weightPrecision`,
    /// `adapter`, `ropeFrequencyFactors`, `attentionBias` and `trainedContextLength` are optional.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(name: try c.decode(String.self, forKey: .name),
                  dim: try c.decode(Int.self, forKey: .dim),
                  hiddenDim: try c.decode(Int.self, forKey: .hiddenDim),
                  layerCount: try c.decode(Int.self, forKey: .layerCount),
                  headCount: try c.decode(Int.self, forKey: .headCount),
                  kvHeadCount: try c.decode(Int.self, forKey: .kvHeadCount),
                  vocabSize: try c.decode(Int.self, forKey: .vocabSize),
                  contextLength: try c.decode(Int.self, forKey: .contextLength),
                  normEpsilon: try c.decodeIfPresent(Float.self, forKey: .normEpsilon) ?? 1e-5,
                  ropeTheta: try c.decodeIfPresent(Float.self, forKey: .ropeTheta) ?? 10000,
                  sharedClassifier: try c.decodeIfPresent(Bool.self, forKey: .sharedClassifier) ?? true,
                  tokenizer: try c.decodeIfPresent(String.self, forKey: .tokenizer),
                  weights: try c.decode(WeightSource.self, forKey: .weights),
                  weightPrecision: try c.decodeIfPresent(WeightPrecision.self, forKey: .weightPrecision) ?? .f32)
        adapter = try c.decodeIfPresent(String.self, forKey: .adapter)
        ropeFrequencyFactors = try c.decodeIfPresent([Float].self, forKey: .ropeFrequencyFactors)
        attentionBias = try c.decodeIfPresent(Bool.self, forKey: .attentionBias) ?? false
        trainedContextLength = try c.decodeIfPresent(Int.self, forKey: .trainedContextLength)
    }

    /// Encodes a config; `weightPrecision` only when it is not the default, so float32 configs
    /// (and the fingerprints hashed from them) read as they always have.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(dim, forKey: .dim)
        try c.encode(hiddenDim, forKey: .hiddenDim)
        try c.encode(layerCount, forKey: .layerCount)
        try c.encode(headCount, forKey: .headCount)
        try c.encode(kvHeadCount, forKey: .kvHeadCount)
        try c.encode(vocabSize, forKey: .vocabSize)
        try c.encode(contextLength, forKey: .contextLength)
        try c.encode(normEpsilon, forKey: .normEpsilon)
        try c.encode(ropeTheta, forKey: .ropeTheta)
        try c.encode(sharedClassifier, forKey: .sharedClassifier)
        try c.encodeIfPresent(tokenizer, forKey: .tokenizer)
        try c.encode(weights, forKey: .weights)
        if weightPrecision != .f32 { try c.encode(weightPrecision, forKey: .weightPrecision) }
        try c.encodeIfPresent(adapter, forKey: .adapter)
        try c.encodeIfPresent(ropeFrequencyFactors, forKey: .ropeFrequencyFactors)
        if attentionBias { try c.encode(attentionBias, forKey: .attentionBias) }
        try c.encodeIfPresent(trainedContextLength, forKey: .trainedContextLength)
    }

    /// This config with at most `limit` positions of context: a longer ``contextLength`` becomes
    /// `limit` and the model's own is kept in ``trainedContextLength``; a config already as short
    /// is returned as it is. What it saves is memory: the K/V a session may grow to, and the RoPE
    /// tables (Llama 3.x declares 131,072 positions, whose float32 K/V alone is 8.6 GB for 3.2 1B).
    /// ``validate()`` refuses a `limit` below 1.
    public func limitingContext(to limit: Int) -> ModelConfig {
        guard limit < contextLength else { return self }
        var limited = self
        limited.trainedContextLength = trainedContextLength ?? contextLength
        limited.contextLength = limit
        return limited
    }

    /// The context length the model declares: ``trainedContextLength`` when it was limited, else ``contextLength``.
    var declaredContextLength: Int { trainedContextLength ?? contextLength }

    /// This config as the model declares it (the context not limited): what the fingerprint
    /// hashes, so limiting the context changes no fingerprint.
    var declared: ModelConfig {
        var whole = self
        whole.contextLength = declaredContextLength
        whole.trainedContextLength = nil
        return whole
    }

    /// Parameters in the weight matrices and norms (classifier counted once when shared).
    public var parameterCount: Int { Int(parameterMagnitude) }

    /// ``parameterCount`` in `Double`: exact for any model ``validate()`` accepts, and finite
    /// (never an integer overflow) for absurd dimensions read from a file header.
    var parameterMagnitude: Double {
        let d = Double(dim), kv = Double(kvHeadCount) * Double(dim / max(1, headCount))
        let perLayer = 2 * d + 2 * d * d + 2 * kv * d + 3 * d * Double(hiddenDim)
        return Double(vocabSize) * d * (sharedClassifier ? 1 : 2) + Double(layerCount) * perLayer + d
    }

    /// Checks that the dimensions describe a model the runtime can build.
    /// - Throws: ``ModelLoadError/invalidDimensions(_:)`` naming the first bad field.
    public func validate() throws {
        func require(_ ok: Bool, _ reason: String) throws {
            if !ok { throw ModelLoadError.invalidDimensions(reason) }
        }
        for (field, value) in [("dim", dim), ("hiddenDim", hiddenDim), ("layerCount", layerCount),
                               ("headCount", headCount), ("kvHeadCount", kvHeadCount),
                               ("vocabSize", vocabSize), ("contextLength", contextLength)] {
            try require(value > 0, "\(field) must be positive, got \(value)")
        }
        try require(dim % headCount == 0, "headCount \(headCount) does not divide dim \(dim)")
        try require(headDim % 2 == 0, "headDim \(headDim) must be even for RoPE")
        try require(headCount % kvHeadCount == 0, "kvHeadCount \(kvHeadCount) does not divide headCount \(headCount)")
        try require(normEpsilon > 0 && normEpsilon.isFinite, "normEpsilon must be positive, got \(normEpsilon)")
        try require(ropeTheta > 1 && ropeTheta.isFinite, "ropeTheta must exceed 1, got \(ropeTheta)")
        if let factors = ropeFrequencyFactors {
            try require(factors.count == headDim / 2, "ropeFrequencyFactors has \(factors.count) values; headDim \(headDim) needs \(headDim / 2)")
            if let bad = factors.firstIndex(where: { !($0 > 0 && $0.isFinite) }) {
                try require(false, "ropeFrequencyFactors[\(bad)] is \(factors[bad]); each must be positive and finite")
            }
        }
        // Keep every buffer index well inside Int32 (BLAS) and memory sane; counted in
        // Double so that absurd headers cannot overflow the check itself.
        let parameters = parameterMagnitude
        try require(parameters < 0x1p31, "the model would have \(parameters) parameters; the limit is 2^31")
        try require(contextLength <= 1 << 20, "contextLength \(contextLength) exceeds 1,048,576")
        if let trained = trainedContextLength {
            try require(trained > contextLength && trained <= Int(UInt32.max),
                        "trainedContextLength \(trained) must exceed contextLength \(contextLength) and fit 32 bits")
        }
    }
}
