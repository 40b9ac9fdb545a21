import CKernels
import Foundation

/// The weights of one transformer block. Shapes are `[rows, cols]`, rows = outputs; the matrices
/// are in the model's ``WeightPrecision``, the norm gains always float32.
public struct LayerWeights: Sendable {
    /// RMSNorm gains before attention, `[1, dim]`.
    public let attentionNorm: Matrix
    /// Query, key and value projections stacked, `[dim + 2 * kvDim, dim]`: one GEMM for all three.
    public let qkv: WeightMatrix
    /// Query projection, `[dim, dim]` (the first rows of ``qkv``).
    public var wq: WeightMatrix { qkv.rows(0 ..< qkv.cols) }
    /// Key projection, `[kvDim, dim]` (the middle rows of ``qkv``).
    public var wk: WeightMatrix { qkv.rows(qkv.cols ..< qkv.cols + kvDim) }
    /// Value projection, `[kvDim, dim]` (the last rows of ``qkv``).
    public var wv: WeightMatrix { qkv.rows(qkv.cols + kvDim ..< qkv.rows) }
    /// Attention output projection, `[dim, dim]`.
    public let wo: WeightMatrix
    /// RMSNorm gains before the feed-forward block, `[1, dim]`.
    public let ffnNorm: Matrix
    /// Gate (W1) and up (W3) projections stacked, `[2 * hiddenDim, dim]`: one GEMM for both.
    public let gateUp: WeightMatrix
    /// Down projection (W2), `[dim, hiddenDim]`.
    public let down: WeightMatrix
    /// Biases of Q, K and V stacked as ``qkv``'s rows, `[1, dim + 2 * kvDim]`, float32; `nil`
    /// without ``ModelConfig/attentionBias``.
    public let qkvBias: Matrix?

    private var kvDim: Int { (qkv.rows - qkv.cols) / 2 }
}

/// All weights of a model in one or two buffers, plus the RoPE tables derived from its config.
///
/// Float32 models keep everything in one buffer, in llama2.c's order. Half-precision models
/// (``ModelConfig/weightPrecision`` `.f16`) keep the matrices in a buffer of halfs and the norm
/// gains in a small float buffer. Immutable once built, so one instance can back any number of
/// ``Transformer``s.
public final class ModelWeights: Sendable {
    /// The dimensions these weights were built for (with their ``ModelConfig/weightPrecision``).
    public let config: ModelConfig
    /// Token embedding, `[vocabSize, dim]`.
    public let tokenEmbedding: WeightMatrix
    /// Per-layer weights, layer 0 first.
    public let layers: [LayerWeights]
    /// Final RMSNorm gains, `[1, dim]`.
    public let finalNorm: Matrix
    /// Output classifier, `[vocabSize, dim]` (the embedding itself when shared).
    public let classifier: WeightMatrix
    /// `cos(position · θ_i)`, `[contextLength, headDim / 2]` (θ_i divided by the config's
    /// ``ModelConfig/ropeFrequencyFactors`` where it has them).
    public let ropeCos: Matrix
    /// `sin(position · θ_i)`, `[contextLength, headDim / 2]`.
    public let ropeSin: Matrix
    /// The float32 weights: all of them, or only the norm gains when the matrices are halfs.
    let storage: FloatBuffer
    /// The weight matrices of a half-precision model.
    let halfStorage: HalfBuffer?

    /// Allocates zeroed weights laid out for `config`, in its ``ModelConfig/weightPrecision``.
    /// - Throws: ``ModelLoadError/invalidDimensions(_:)`` when the config is impossible,
    ///   ``ModelLoadError/exceedsMemoryLimit(_:limitBytes:)`` when running it would not fit in
    ///   `memoryLimit` (checked before allocating anything), ``ModelLoadError/allocationFailed(bytes:)``.
    init(zeroedFor config: ModelConfig, memoryLimit: Int) throws {
        try config.validate()
        try config.checkResources(limit: memoryLimit)
        self.config = config
        let d = config.dim, kv = config.kvDim, h = config.hiddenDim
        let vectors = config.layerCount * 2 * d + d
        let matrices = config.parameterCount - vectors
        let half = config.weightPrecision == .f16
        let floats: FloatBuffer, halfs: HalfBuffer?
        do {
            floats = try FloatBuffer(checkedCount: half ? vectors : vectors + matrices)
            halfs = half ? try HalfBuffer(checkedCount: matrices) : nil
        } catch {
            throw ModelLoadError.allocationFailed(bytes: vectors * 4 + matrices * config.weightPrecision.bytesPerWeight)
        }
        var floatCursor = 0, halfCursor = 0
        func vector(_ count: Int) -> Matrix {
            defer { floatCursor += count }
            return Matrix(buffer: floats, offset: floatCursor, rows: 1, cols: count)
        }
        func matrix(_ rows: Int, _ cols: Int) -> WeightMatrix {
            if let halfs {
                defer { halfCursor += rows * cols }
                return WeightMatrix(HalfMatrix(buffer: halfs, offset: halfCursor, rows: rows, cols: cols))
            }
            defer { floatCursor += rows * cols }
            return WeightMatrix(Matrix(buffer: floats, offset: floatCursor, rows: rows, cols: cols))
        }
        tokenEmbedding = matrix(config.vocabSize, d)
        layers = (0 ..< config.layerCount).map { _ in
            LayerWeights(attentionNorm: vector(d), qkv: matrix(d + 2 * kv, d),
                         wo: matrix(d, d), ffnNorm: vector(d), gateUp: matrix(2 * h, d), down: matrix(d, h),
                         qkvBias: config.attentionBias ? Matrix.zeros(rows: 1, cols: d + 2 * kv) : nil)
        }
        finalNorm = vector(d)
        classifier = config.sharedClassifier ? tokenEmbedding : matrix(config.vocabSize, d)
        storage = floats
        halfStorage = halfs
        (ropeCos, ropeSin) = Self.ropeTables(config)
    }

    /// Views over the same buffers (``packedForStreaming()``).
    private init(config: ModelConfig, tokenEmbedding: WeightMatrix, layers: [LayerWeights], finalNorm: Matrix,
                 classifier: WeightMatrix, ropeCos: Matrix, ropeSin: Matrix, storage: FloatBuffer, halfStorage: HalfBuffer?) {
        self.config = config
        self.tokenEmbedding = tokenEmbedding
        self.layers = layers
        self.finalNorm = finalNorm
        self.classifier = classifier
        self.ropeCos = ropeCos
        self.ropeSin = ropeSin
        self.storage = storage
        self.halfStorage = halfStorage
    }

    /// Whether loaders pack the projection matrices for streaming (``Kernels/pack(_:)``). On by
    /// default; `KVSESSION_PACK=0` keeps plain rows (to compare the two; results are the same bits
    /// for passes of up to ``Kernels/skinnyRowLimit`` tokens, and up to ``Kernels/blockedSkinnyRows``
    /// where those exceed it).
    package static let packsWeights = ProcessInfo.processInfo.environment["KVSESSION_PACK"] != "0"

    /// Whether any projection matrix is packed.
    package var hasPackedWeights: Bool { classifier.packed || layers.contains { $0.qkv.packed || $0.wo.packed || $0.gateUp.packed || $0.down.packed } }

    /// These weights with each projection matrix packed in place for streaming where its shape
    /// allows (whole groups of ``WeightMatrix/packGroup`` rows, and so every sub-matrix a view reads, Q/K/V and gate/up,
    /// too); the embedding, which is gathered by row, stays plain, and so does a classifier that
    /// shares it. Returns views over the same buffers: `self` must not be used afterwards. The
    /// loaders call it last (when ``packsWeights``).
    package func packedForStreaming() -> ModelWeights {
        let c = config
        func pack(_ m: WeightMatrix, _ views: Int...) -> WeightMatrix {
            m.isPackable && views.allSatisfy({ $0 % WeightMatrix.packGroup == 0 }) ? Kernels.pack(m) : m
        }
        let packedLayers = layers.map { l in
            LayerWeights(attentionNorm: l.attentionNorm, qkv: pack(l.qkv, c.dim, c.kvDim), wo: pack(l.wo),
                         ffnNorm: l.ffnNorm, gateUp: pack(l.gateUp, c.hiddenDim), down: pack(l.down), qkvBias: l.qkvBias)
        }
        return ModelWeights(config: c, tokenEmbedding: tokenEmbedding, layers: packedLayers, finalNorm: finalNorm,
                            classifier: c.sharedClassifier ? classifier : pack(classifier), ropeCos: ropeCos, ropeSin: ropeSin,
                            storage: storage, halfStorage: halfStorage)
    }

    /// The value stored at `index` of ``storage`` (float32 `true`) or ``halfStorage`` (`false`) were
    /// every matrix in plain rows: packing moves elements only within their matrix, and the
    /// fingerprint samples plain positions, so it names the weights whatever their layout.
    func plainBits(at index: Int, inFloats: Bool) -> UInt32 {
        for m in [classifier, tokenEmbedding] + layers.flatMap({ [$0.qkv, $0.wo, $0.gateUp, $0.down] }) where m.packed {
            switch m.storage {
            case let .f32(f) where inFloats && index >= f.offset && index < f.offset + f.rows * f.cols:
                return m[(index - f.offset) / f.cols, (index - f.offset) % f.cols].bitPattern
            case let .f16(h) where !inFloats && index >= h.offset && index < h.offset + h.rows * h.cols:
                return UInt32(h.base[kv_packed_index((index - h.offset) / h.cols, (index - h.offset) % h.cols, h.cols)])
            default: continue
            }
        }
        return inFloats ? storage[index].bitPattern : UInt32(halfStorage?[index] ?? 0)
    }

    /// ``packedForStreaming()`` when ``packsWeights``, else `self`.
    func finishedLoading() -> ModelWeights { Self.packsWeights ? packedForStreaming() : self }

    /// Zeroed weights flagged packed wherever `other`'s are (zeros read the same in either layout).
    private func laidOut(like other: ModelWeights) -> ModelWeights {
        mappingProjections(pairedWith: other) { m, o in o.packed ? m.relabeled(packed: true) : m }
    }

    /// These weights with every projection matrix (and a classifier of its own) replaced by
    /// `transform(matrix, the same matrix of other)`: views, the buffers untouched.
    private func mappingProjections(pairedWith other: ModelWeights,
                                    _ transform: (WeightMatrix, WeightMatrix) -> WeightMatrix) -> ModelWeights {
        let mapped = zip(layers, other.layers).map { l, o in
            LayerWeights(attentionNorm: l.attentionNorm, qkv: transform(l.qkv, o.qkv), wo: transform(l.wo, o.wo),
                         ffnNorm: l.ffnNorm, gateUp: transform(l.gateUp, o.gateUp), down: transform(l.down, o.down),
                         qkvBias: l.qkvBias)
        }
        return ModelWeights(config: config, tokenEmbedding: tokenEmbedding, layers: mapped, finalNorm: finalNorm,
                            classifier: config.sharedClassifier ? classifier : transform(classifier, other.classifier),
                            ropeCos: ropeCos, ropeSin: ropeSin, storage: storage, halfStorage: halfStorage)
    }

    /// A copy of these weights with plain rows throughout (to compare layouts, or to change them),
    /// labelled with `config` (same dimensions and precision; default: this model's).
    package func unpackedCopy(config: ModelConfig? = nil, memoryLimit: Int = .max) throws -> ModelWeights {
        let out = try ModelWeights(zeroedFor: config ?? self.config, memoryLimit: memoryLimit)
        copyEach(into: out) { from, to in
            switch to.storage {
            case let .f32(m): Kernels.unpack(from, rows: 0 ..< from.rows, into: m.base, rowStride: m.rowStride)
            case .f16: Kernels.convert(WeightMatrix(from.floatMatrix()), into: to)   // exact: the values are halfs
            }
        }
        return out
    }

    /// Copies the norm gains into `out` and every weight matrix with `copy` (same config shape).
    private func copyEach(into out: ModelWeights, _ copy: (WeightMatrix, WeightMatrix) -> Void) {
        copy(tokenEmbedding, out.tokenEmbedding)
        for (a, b) in zip(layers, out.layers) {
            Kernels.copy(a.attentionNorm, into: b.attentionNorm)
            Kernels.copy(a.ffnNorm, into: b.ffnNorm)
            if let from = a.qkvBias, let to = b.qkvBias { Kernels.copy(from, into: to) }
            copy(a.qkv, b.qkv)
            copy(a.wo, b.wo)
            copy(a.gateUp, b.gateUp)
            copy(a.down, b.down)
        }
        Kernels.copy(finalNorm, into: out.finalNorm)
        if !config.sharedClassifier { copy(classifier, out.classifier) }
    }

    /// Total bytes of weights.
    public var byteCount: Int { storage.byteCount + (halfStorage?.count ?? 0) * MemoryLayout<UInt16>.stride }

    /// How the weight matrices are stored.
    public var precision: WeightPrecision { config.weightPrecision }

    /// These weights in `precision`: `self` when they already are, else a new copy (each weight
    /// rounded to the nearest half for `.f16`; exact back to `.f32`). Norm gains stay float32.
    /// - Parameters:
    ///   - precision: the precision wanted.
    ///   - memoryLimit: the most bytes running the converted model may need (checked first).
    /// - Throws: ``ModelLoadError/beyondHalfRange(tensor:count:largest:)`` when a weight would
    ///   round to infinity as a half (``checkHalfRange()``), before anything is allocated; other
    ///   ``ModelLoadError`` cases when the copy does not fit or cannot be allocated.
    public func converted(to precision: WeightPrecision, memoryLimit: Int = MemoryLimit.bytes) throws -> ModelWeights {
        guard precision != self.precision else { return self }
        if precision == .f16 { try checkHalfRange() }
        var target = config
        target.weightPrecision = precision
        let out = try ModelWeights(zeroedFor: target, memoryLimit: memoryLimit).laidOut(like: self)
        copyEach(into: out) { Kernels.convert($0, into: $1) }
        return out.checkingFiniteHalfs()
    }

    /// These weights with each half-precision projection scanned for infinities and NaNs, so the
    /// kernels learn which matrices are finite (``WeightMatrix/checkingFiniteHalfs()``). Loaders
    /// call it once the values are final; float32 weights come back as they are.
    func checkingFiniteHalfs() -> ModelWeights {
        precision == .f16 ? mappingProjections(pairedWith: self) { m, _ in m.checkingFiniteHalfs() } : self
    }

    /// Checks that every weight matrix fits IEEE half precision: that no finite weight has a
    /// magnitude of 65,520 or more, which would round to infinity (and make every logit it reaches
    /// infinite or NaN). Infinities and NaNs already present are left to IEEE arithmetic, as in
    /// float32. Half weights always pass. ``converted(to:)`` runs it before converting to `.f16`;
    /// the same as ``checkRange(for:)`` with `.f16`.
    /// - Throws: ``ModelLoadError/beyondHalfRange(tensor:count:largest:)`` for the first tensor (in
    ///   file order) that does not fit.
    public func checkHalfRange() throws(ModelLoadError) {
        try checkRange(for: .f16)
    }

    /// Checks that ``ggufData(tokenizer:tensorType:)`` with `tensorType` would write every weight
    /// matrix finite, which it does not check itself: F32 always does; F16 needs every finite
    /// weight below 65,520 in magnitude; Q8_0 needs each block's scale (its largest magnitude over
    /// 127) to fit a half, i.e. magnitudes below 8,321,040, and the half rule for the matrices it
    /// writes as F16 (rows that are not whole blocks). Weights already infinite or NaN are not
    /// counted, though in Q8_0 one makes its whole block read back NaN (the scale is the block's
    /// largest magnitude). Half weights always pass.
    /// - Throws: for the first tensor (in file order) that does not fit,
    ///   ``ModelLoadError/beyondHalfRange(tensor:count:largest:)`` when it is written as halfs, or
    ///   ``ModelLoadError/beyondQ8_0Range(tensor:blocks:largest:)`` when as Q8_0 blocks;
    ///   ``ModelLoadError/unwritableEncoding(_:)`` for an encoding the package only reads.
    public func checkRange(for tensorType: GGUFTensorType) throws(ModelLoadError) {
        guard tensorType.isWritable else { throw .unwritableEncoding(tensorType) }
        for t in ggufTensors() where !t.vector {
            if let error = ModelLoadError.encodingOverflow(tensor: t.name, t.matrix, as: tensorType) { throw error }
        }
    }

    // RoPE angles computed in float32 exactly as llama2.c's run.c does, so
    // positions agree with the reference bit for bit before the trig call.
    private static func ropeTables(_ config: ModelConfig) -> (Matrix, Matrix) {
        let half = config.headDim / 2
        let cos = Matrix.zeros(rows: config.contextLength, cols: half)
        let sin = Matrix.zeros(rows: config.contextLength, cols: half)
        for i in 0 ..< half {
            var frequency = 1 / Foundation.powf(config.ropeTheta, Float(2 * i) / Float(config.headDim))
            if let factors = config.ropeFrequencyFactors { frequency /= factors[i] }   // Llama 3.1's long-context divisors
            for position in 0 ..< config.contextLength {
                let angle = Float(position) * frequency
                cos[position, i] = Foundation.cosf(angle)
                sin[position, i] = Foundation.sinf(angle)
            }
        }
        return (cos, sin)
    }
}
