import Foundation

/// The float32 weights of one transformer block. Shapes are `[rows, cols]`, rows = outputs.
public struct LayerWeights: Sendable {
    /// RMSNorm gains before attention, `[1, dim]`.
    public let attentionNorm: Matrix
    /// Query, key and value projections stacked, `[dim + 2 * kvDim, dim]`: one GEMM for all three.
    public let qkv: Matrix
    /// Query projection, `[dim, dim]` (the first rows of ``qkv``).
    public var wq: Matrix { qkv.rows(0 ..< qkv.cols) }
    /// Key projection, `[kvDim, dim]` (the middle rows of ``qkv``).
    public var wk: Matrix { qkv.rows(qkv.cols ..< qkv.cols + kvDim) }
    /// Value projection, `[kvDim, dim]` (the last rows of ``qkv``).
    public var wv: Matrix { qkv.rows(qkv.cols + kvDim ..< qkv.rows) }
    /// Attention output projection, `[dim, dim]`.
    public let wo: Matrix
    /// RMSNorm gains before the feed-forward block, `[1, dim]`.
    public let ffnNorm: Matrix
    /// Gate (W1) and up (W3) projections stacked, `[2 * hiddenDim, dim]`: one GEMM for both.
    public let gateUp: Matrix
    /// Down projection (W2), `[dim, hiddenDim]`.
    public let down: Matrix

    private var kvDim: Int { (qkv.rows - qkv.cols) / 2 }
}

/// All weights of a model in one buffer, plus the RoPE tables derived from its config.
///
/// Immutable once built, so one instance can back any number of ``Transformer``s.
public final class ModelWeights: Sendable {
    /// The dimensions these weights were built for.
    public let config: ModelConfig
    /// Token embedding, `[vocabSize, dim]`.
    public let tokenEmbedding: Matrix
    /// Per-layer weights, layer 0 first.
    public let layers: [LayerWeights]
    /// Final RMSNorm gains, `[1, dim]`.
    public let finalNorm: Matrix
    /// Output classifier, `[vocabSize, dim]` (the embedding itself when shared).
    public let classifier: Matrix
    /// `cos(position · θ_i)`, `[contextLength, headDim / 2]`.
    public let ropeCos: Matrix
    /// `sin(position · θ_i)`, `[contextLength, headDim / 2]`.
    public let ropeSin: Matrix
    /// The single buffer holding every weight.
    let storage: FloatBuffer

    /// Allocates zeroed weights laid out for `config`.
    /// - Throws: ``ModelLoadError/invalidDimensions(_:)`` when the config is impossible,
    ///   ``ModelLoadError/exceedsMemoryLimit(_:limitBytes:)`` when running it would not fit in
    ///   `memoryLimit` (checked before allocating anything), ``ModelLoadError/allocationFailed(bytes:)``.
    init(zeroedFor config: ModelConfig, memoryLimit: Int) throws {
        try config.validate()
        try config.checkResources(limit: memoryLimit)
        self.config = config
        let d = config.dim, kv = config.kvDim, h = config.hiddenDim
        let perLayer = 2 * d + 2 * d * d + 2 * kv * d + 3 * d * h
        let embedding = config.vocabSize * d
        let total = embedding * (config.sharedClassifier ? 1 : 2) + config.layerCount * perLayer + d
        let buffer: FloatBuffer
        do { buffer = try FloatBuffer(checkedCount: total) } catch {
            throw ModelLoadError.allocationFailed(bytes: total * MemoryLayout<Float>.stride)
        }
        var cursor = 0
        func take(_ rows: Int, _ cols: Int) -> Matrix {
            defer { cursor += rows * cols }
            return Matrix(buffer: buffer, offset: cursor, rows: rows, cols: cols)
        }
        tokenEmbedding = take(config.vocabSize, d)
        layers = (0 ..< config.layerCount).map { _ in
            LayerWeights(attentionNorm: take(1, d), qkv: take(d + 2 * kv, d),
                         wo: take(d, d), ffnNorm: take(1, d), gateUp: take(2 * h, d), down: take(d, h))
        }
        finalNorm = take(1, d)
        classifier = config.sharedClassifier ? tokenEmbedding : take(config.vocabSize, d)
        storage = buffer
        (ropeCos, ropeSin) = Self.ropeTables(config)
    }

    /// Total bytes of weights.
    public var byteCount: Int { storage.byteCount }

    // RoPE angles computed in float32 exactly as llama2.c's run.c does, so
    // positions agree with the reference bit for bit before the trig call.
    private static func ropeTables(_ config: ModelConfig) -> (Matrix, Matrix) {
        let half = config.headDim / 2
        let cos = Matrix.zeros(rows: config.contextLength, cols: half)
        let sin = Matrix.zeros(rows: config.contextLength, cols: half)
        for i in 0 ..< half {
            let frequency = 1 / Foundation.powf(config.ropeTheta, Float(2 * i) / Float(config.headDim))
            for position in 0 ..< config.contextLength {
                let angle = Float(position) * frequency
                cos[position, i] = Foundation.cosf(angle)
                sin[position, i] = Foundation.sinf(angle)
            }
        }
        return (cos, sin)
    }
}
