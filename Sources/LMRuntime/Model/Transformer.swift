import Foundation

/// Scratch for one forward pass, sized once so the pass itself allocates nothing.
final class Workspace {
    let x, normed, queries, attended: Matrix    // [maxBatch, dim]
    let gateUp: Matrix                          // [maxBatch, 2 * hiddenDim]
    let attentionScratch: AttentionScratch     // per-worker score rows and stacked heads
    let logits: Matrix                          // [1, vocabSize]
    let halfBlocks: HalfScratch?                // f16 or packed weights, passes of several rows: [workers · halfBlockRows, max(dim, hiddenDim)]

    init(_ weights: ModelWeights, maxBatch: Int) {
        let c = weights.config
        x = .zeros(rows: maxBatch, cols: c.dim)
        normed = .zeros(rows: maxBatch, cols: c.dim)
        queries = .zeros(rows: maxBatch, cols: c.dim)
        attended = .zeros(rows: maxBatch, cols: c.dim)
        gateUp = .zeros(rows: maxBatch, cols: 2 * c.hiddenDim)
        attentionScratch = AttentionScratch(headCount: c.headCount, kvHeadCount: c.kvHeadCount, headDim: c.headDim,
                                            contextLength: c.contextLength, workers: Kernels.workerCount)
        logits = .zeros(rows: 1, cols: c.vocabSize)
        halfBlocks = HalfScratch.needed(for: weights, maxBatch: maxBatch)
    }
}

/// A Llama-architecture decoder: RMSNorm, RoPE, grouped-query attention, SwiGLU.
///
/// One forward pass handles `T` new tokens at once (prefill); decode is `T = 1`.
/// The pass appends the tokens' K/V rows to a ``KVCache`` and produces the
/// logits of the last token only. A `Transformer` owns scratch memory sized by its
/// batch (never by the context), used only inside the process-wide pass lock, so one
/// instance can serve any number of sequences and tasks (sessions on one model share
/// one): callers that share it take the logits with ``forward(_:cache:logits:)``.
public final class Transformer: @unchecked Sendable {
    /// The weights (shareable between transformers).
    public let weights: ModelWeights
    /// The most tokens one internal pass processes; longer inputs run in consecutive passes.
    public let maxBatch: Int
    private let workspace: Workspace

    /// Serialises forward passes process-wide. A pass already splits its work over every
    /// core through the kernels' worker pool; a second pass beside it would find the pool
    /// busy, run on one thread and slow both. (Before the pool, passes racing on OpenBLAS's
    /// global thread pool crashed or hung it.)
    private static let passLock = NSLock()

    /// The model's dimensions.
    public var config: ModelConfig { weights.config }

    /// A transformer over `weights`.
    /// - Parameters:
    ///   - weights: the model.
    ///   - maxBatch: tokens per pass (scratch grows with it); defaults to the context length
    ///     (capped at ``defaultMaxBatch``), and longer inputs run in consecutive passes.
    public init(weights: ModelWeights, maxBatch: Int? = nil) {
        self.weights = weights
        self.maxBatch = max(1, min(maxBatch ?? Self.defaultMaxBatch, weights.config.contextLength))
        workspace = Workspace(weights, maxBatch: self.maxBatch)
    }

    /// The batch a transformer gets unless told otherwise: large enough that a pass's GEMMs
    /// run at full speed (prefill ratios are flat from a few hundred rows on), small enough
    /// that scratch never scales with a long context.
    public static let defaultMaxBatch = 1024

    /// Threads a pass splits its work over, `1...workerCount` (default: all); the same
    /// work is cut the same way whatever the count, so logits are identical for every value.
    public static var threadCount: Int {
        get { Kernels.threadCount }
        set { Kernels.threadCount = newValue }
    }

    /// The most threads a pass can use: one per core.
    public static var workerCount: Int { Kernels.workerCount }

    /// An empty cache shaped for this model.
    /// - Parameter capacity: positions to allocate; defaults to (and is capped at) the context length.
    public func makeCache(capacity: Int? = nil) -> DenseKVCache {
        let n = max(1, min(capacity ?? config.contextLength, config.contextLength))
        return DenseKVCache(layerCount: config.layerCount, kvDim: config.kvDim, capacity: n)
    }

    /// Runs `tokens` at positions `cache.count ..< cache.count + tokens.count`, appending their K/V rows.
    ///
    /// - Parameters:
    ///   - tokens: token ids, each in `0..<vocabSize`.
    ///   - cache: the sequence's cache; it must match the model's shape.
    /// - Returns: the logits of the last token, `[1, vocabSize]`; the view is
    ///   overwritten by the next call (copy it with `toArray()` to keep it).
    /// - Throws: ``RuntimeError`` before computing anything when an id is out of
    ///   range, the input is empty, or the cache would overflow. The cache is then unchanged.
    @discardableResult
    public func forward(_ tokens: [Int], cache: some KVCache) throws -> Matrix {
        try locked(tokens, cache: cache) { $0 }
    }

    /// Runs `tokens` like ``forward(_:cache:)`` and copies the last token's logits into `logits`
    /// before another pass can overwrite them: the form to use on a shared transformer.
    /// - Parameters:
    ///   - tokens: token ids, each in `0..<vocabSize`.
    ///   - cache: the sequence's cache.
    ///   - logits: `[1, vocabSize]`, overwritten.
    /// - Throws: ``RuntimeError`` as ``forward(_:cache:)`` does; `logits` is then unchanged.
    public func forward(_ tokens: [Int], cache: some KVCache, logits: Matrix) throws {
        precondition(logits.rows == 1 && logits.cols == config.vocabSize, "logits must be [1, vocabSize]")
        try locked(tokens, cache: cache) { Kernels.copy($0, into: logits) }
    }

    /// Checks the inputs, then runs the passes and `read` on the logits under the pass lock.
    private func locked<T>(_ tokens: [Int], cache: some KVCache, read: (Matrix) -> T) throws -> T {
        guard !tokens.isEmpty else { throw RuntimeError.emptyInput }
        guard cache.layerCount == config.layerCount, cache.kvDim == config.kvDim else {
            throw RuntimeError.cacheShapeMismatch(expectedLayers: config.layerCount, expectedKVDim: config.kvDim,
                                                  layers: cache.layerCount, kvDim: cache.kvDim)
        }
        if let bad = tokens.firstIndex(where: { $0 < 0 || $0 >= config.vocabSize }) {
            throw RuntimeError.tokenOutOfVocabulary(token: tokens[bad], index: bad, vocabSize: config.vocabSize)
        }
        let capacity = min(cache.capacity, config.contextLength)
        guard cache.count + tokens.count <= capacity else {
            throw RuntimeError.contextOverflow(cachedTokens: cache.count, newTokens: tokens.count, capacity: capacity)
        }
        Self.passLock.lock()
        defer { Self.passLock.unlock() }
        try cache.reserve(positions: cache.count + tokens.count)   // before the pass: it allocates nothing
        for start in stride(from: 0, to: tokens.count, by: maxBatch) {
            pass(tokens[start ..< min(tokens.count, start + maxBatch)], cache: cache)
        }
        return read(workspace.logits)
    }

    /// One batched pass over `tokens` (at most `maxBatch`), inputs already checked.
    private func pass(_ tokens: ArraySlice<Int>, cache: some KVCache) {
        let c = config, w = weights, s = workspace
        let t = tokens.count, start = cache.count, end = start + t
        let x = s.x.rows(0 ..< t), normed = s.normed.rows(0 ..< t), q = s.queries.rows(0 ..< t)
        let attended = s.attended.rows(0 ..< t), gateUp = s.gateUp.rows(0 ..< t), h = s.halfBlocks
        Kernels.gatherRows(w.tokenEmbedding, ids: tokens, into: x)                      // embed
        for (l, layer) in w.layers.enumerated() {
            let keys = cache.keys(layer: l).rows(0 ..< end), values = cache.values(layer: l).rows(0 ..< end)
            let newKeys = keys.rows(start ..< end), newValues = values.rows(start ..< end)
            Kernels.rmsNorm(x, weight: layer.attentionNorm, epsilon: c.normEpsilon, into: normed) // attention norm
            Kernels.matmul(normed, transposed: layer.qkv, into: q, newKeys, newValues, scratch: h) // Q, and K/V into the cache
            if let bias = layer.qkvBias { Kernels.addBias(bias, to: q, newKeys, newValues) }   // Qwen2's Q, K, V biases
            Kernels.rope(q, headDim: c.headDim, startPosition: start, cos: w.ropeCos, sin: w.ropeSin)
            Kernels.rope(newKeys, headDim: c.headDim, startPosition: start, cos: w.ropeCos, sin: w.ropeSin)
            Kernels.causalAttention(queries: q, keys: keys, values: values, output: attended,
                                    scratch: s.attentionScratch, headCount: c.headCount, kvHeadCount: c.kvHeadCount)
            Kernels.matmul(attended, transposed: layer.wo, into: x, beta: 1, scratch: h)  // output projection + residual
            Kernels.rmsNorm(x, weight: layer.ffnNorm, epsilon: c.normEpsilon, into: normed) // FFN norm
            Kernels.matmul(normed, transposed: layer.gateUp, into: gateUp, scratch: h)     // gate | up
            Kernels.swiGLU(gateUp)                                                        // silu(gate) * up
            Kernels.matmul(gateUp.columns(0 ..< c.hiddenDim), transposed: layer.down, into: x, beta: 1, scratch: h) // down + residual
        }
        let last = s.normed.row(0)                                                          // only the last row's logits are read
        Kernels.rmsNorm(x.row(t - 1), weight: w.finalNorm, epsilon: c.normEpsilon, into: last) // final norm
        Kernels.matmul(last, transposed: w.classifier, into: s.logits)                     // classifier
        cache.append(tokens)
    }
}
