import Foundation

extension ModelWeights {
    /// Loads a GGUF (version 3) model of the `llama` architecture.
    ///
    /// Reads the dimensions from `llama.*` metadata, then every tensor under llama.cpp's names
    /// (`token_embd`, `blk.N.attn_q`, ..., `output_norm`, and `output` unless the classifier is
    /// tied to the embedding), decoding every encoding ``GGUFTensorType`` lists to float32. Q and K
    /// are used as stored: GGUF's `llama` RoPE rotates adjacent pairs, as llama2.c and this runtime do.
    /// - Parameters:
    ///   - url: the `.gguf` file.
    ///   - precision: how the weight matrices are kept. With `.f16` each tensor is decoded to
    ///     float32 scratch and rounded into half storage in turn, so the float32 model never exists
    ///     in memory; the weights have the bits of loading in float32 and then
    ///     ``converted(to:memoryLimit:)``, and are refused the same way when one does not fit a half.
    ///   - contextLength: the most positions of context to give the model (``ModelConfig/limitingContext(to:)``);
    ///     `nil` for the file's own `context_length`. Long-context models (Llama 3.x declares 131,072)
    ///     otherwise count K/V for their whole context against `memoryLimit`.
    ///   - memoryLimit: the most bytes running the model may need (``MemoryLimit``), checked before
    ///     anything is allocated.
    /// - Throws: ``ModelLoadError/gguf(path:_:)`` naming the field or tensor and its byte offset,
    ///   ``ModelLoadError/beyondHalfRange(tensor:count:largest:)`` (with `.f16`), or the
    ///   ``ModelLoadError`` cases for unreadable files, impossible dimensions (a `contextLength`
    ///   below 1 among them) and memory.
    public static func gguf(at url: URL, precision: WeightPrecision = .f32, contextLength: Int? = nil,
                            memoryLimit: Int = MemoryLimit.bytes) throws -> ModelWeights {
        let data = try ModelLoadError.mappedContents(of: url)
        return try gguf(data: data, path: url.path, precision: precision, contextLength: contextLength, memoryLimit: memoryLimit)
    }

    /// Loads a GGUF model from its bytes (see ``gguf(at:precision:contextLength:memoryLimit:)``).
    public static func gguf(data: Data, path: String = "<memory>", precision: WeightPrecision = .f32,
                            contextLength: Int? = nil, memoryLimit: Int = MemoryLimit.bytes) throws -> ModelWeights {
        let file: GGUFFile
        do { file = try GGUFFile(data: data) } catch { throw ModelLoadError.gguf(path: path, error) }
        return try gguf(file, path: path, precision: precision, contextLength: contextLength, memoryLimit: memoryLimit)
    }

    /// Loads the model of an already parsed GGUF file (see ``gguf(at:precision:contextLength:memoryLimit:)``),
    /// e.g. one whose vocabulary ``Tokenizer/init(gguf:)`` reads too: a large vocabulary's metadata
    /// is then parsed once. `path` names the file in errors.
    public static func gguf(_ file: GGUFFile, path: String = "<memory>", precision: WeightPrecision = .f32,
                            contextLength: Int? = nil, memoryLimit: Int = MemoryLimit.bytes) throws -> ModelWeights {
        let data = file.data
        var config: ModelConfig
        do throws(GGUFError) {
            config = try ggufConfig(file, path: path)
        } catch { throw ModelLoadError.gguf(path: path, error) }
        config.weightPrecision = precision
        if let contextLength { config = config.limitingContext(to: contextLength) }
        try config.validate()
        try config.checkResources(limit: memoryLimit)
        if precision == .f16 {   // while loading, the weights and the largest matrix's float32 scratch
            let estimate = config.resourceEstimate()
            let loading = ResourceEstimate(weightBytes: estimate.weightBytes, scratchBytes: Int(min(Double(Int.max / 4), 4 * Double(max(config.vocabSize, config.hiddenDim, config.dim)) * Double(config.dim))),
                                           contextKVBytes: 0)
            guard loading.totalBytes <= memoryLimit else { throw ModelLoadError.exceedsMemoryLimit(loading, limitBytes: memoryLimit) }
        }
        let weights = try ModelWeights(zeroedFor: config, memoryLimit: memoryLimit)
        let targets = weights.ggufTensors()
        let infos: [GGUFTensorInfo]
        do throws(GGUFError) {
            let known = Set(targets.map(\.name) + (config.ropeFrequencyFactors == nil ? [] : [Self.ropeFactorsTensor]))
            if let stray = file.tensors.first(where: { !known.contains($0.name) }) {
                throw GGUFError.invalidField(field: "tensor \(stray.name)", byteOffset: stray.infoOffset,
                                             reason: "not a tensor of the llama architecture (rope scaling and other extras are not supported)")
            }
            // Every shape is checked before any data is decoded.
            infos = try targets.map { target throws(GGUFError) -> GGUFTensorInfo in
                guard let info = file.tensor(named: target.name) else { throw .missingTensor(target.name) }
                let expected = target.vector ? [target.matrix.rows * target.matrix.cols] : [target.matrix.cols, target.matrix.rows]
                guard info.dimensions == expected else {
                    throw .shapeMismatch(tensor: info.name, expected: expected, found: info.dimensions, byteOffset: info.infoOffset)
                }
                return info
            }
        } catch { throw ModelLoadError.gguf(path: path, error) }
        // Half targets are decoded into one float32 scratch as large as the largest of them.
        let halfCounts = targets.compactMap { t -> Int? in if case .f16 = t.matrix.storage { t.matrix.rows * t.matrix.cols } else { nil } }
        let scratch: FloatBuffer?
        do { scratch = try halfCounts.max().map { try FloatBuffer(checkedCount: $0) } } catch {
            throw ModelLoadError.allocationFailed(bytes: 4 * (halfCounts.max() ?? 0))
        }
        // Qwen2's files keep Q and K in Hugging Face's order, which rotates pairs (i, i + headDim/2);
        // this runtime rotates adjacent pairs, so their rows (and biases) are interleaved per head.
        let halfSplit = file.metadata["general.architecture"]?.stringValue == "qwen2"
        func reorder(_ name: String, _ matrix: Matrix) {
            guard halfSplit, [".attn_q.", ".attn_k."].contains(where: name.contains) else { return }
            Self.interleaveHalves(matrix, headDim: config.headDim)
        }
        for (target, info) in zip(targets, infos) {
            guard let scratch, case .f16 = target.matrix.storage else {
                let matrix = target.matrix.floatMatrix()   // a view: fresh float32 weights are plain rows
                info.type.decode(from: data, byteOffset: info.dataOffset, into: matrix)
                reorder(target.name, matrix)
                continue
            }
            let floats = WeightMatrix(Matrix(buffer: scratch, rows: target.matrix.rows, cols: target.matrix.cols))
            info.type.decode(from: data, byteOffset: info.dataOffset, into: floats.floatMatrix())
            reorder(target.name, floats.floatMatrix())
            if let error = ModelLoadError.encodingOverflow(tensor: target.name, floats, as: .f16) { throw error }
            Kernels.convert(floats, into: target.matrix)
        }
        return weights.finishedLoading().checkingFiniteHalfs()
    }

    /// The model's dimensions from a GGUF file's metadata.
    static func ggufConfig(_ file: GGUFFile, path: String) throws(GGUFError) -> ModelConfig {
        let architecture = try file.string("general.architecture")
        guard architecture == "llama" || architecture == "qwen2" else { throw .unsupportedArchitecture(architecture) }
        let heads = try file.integer("\(architecture).attention.head_count")
        let dim = try file.integer("\(architecture).embedding_length")
        guard let embedding = file.tensor(named: "token_embd.weight") else { throw .missingTensor("token_embd.weight") }
        guard embedding.dimensions.count == 2 else {
            throw .shapeMismatch(tensor: embedding.name, expected: [dim, -1], found: embedding.dimensions, byteOffset: embedding.infoOffset)
        }
        let vocabulary = embedding.dimensions[1]
        if file.metadata["\(architecture).vocab_size"] != nil, try file.integer("\(architecture).vocab_size") != vocabulary {
            throw .invalidField(field: "\(architecture).vocab_size", byteOffset: file.offset(of: "\(architecture).vocab_size"),
                                reason: "token_embd.weight has \(vocabulary) rows")
        }
        if file.metadata["\(architecture).rope.dimension_count"] != nil, heads > 0,
           try file.integer("\(architecture).rope.dimension_count") != dim / heads {
            throw .invalidField(field: "\(architecture).rope.dimension_count", byteOffset: file.offset(of: "\(architecture).rope.dimension_count"),
                                reason: "partial rotary embedding is not supported; it must equal the head size \(dim / heads)")
        }
        if let scaling = file.metadata["\(architecture).rope.scaling.type"], scaling.stringValue != "none" {
            throw .invalidField(field: "\(architecture).rope.scaling.type", byteOffset: file.offset(of: "\(architecture).rope.scaling.type"),
                                reason: "RoPE scaling is not supported")
        }
        let name = file.metadata["general.name"]?.stringValue
            ?? URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        var config = ModelConfig(name: name, dim: dim, hiddenDim: try file.integer("\(architecture).feed_forward_length"),
                           layerCount: try file.integer("\(architecture).block_count"), headCount: heads,
                           kvHeadCount: try file.integer("\(architecture).attention.head_count_kv", default: heads),
                           vocabSize: vocabulary, contextLength: try file.integer("\(architecture).context_length"),
                           normEpsilon: try file.float("\(architecture).attention.layer_norm_rms_epsilon", default: 1e-5),
                           ropeTheta: try file.float("\(architecture).rope.freq_base", default: 10000),
                           sharedClassifier: file.tensor(named: "output.weight") == nil, weights: .gguf(path: path))
        if let factors = file.tensor(named: Self.ropeFactorsTensor), heads > 0 {   // Llama 3.1's long-context RoPE
            guard factors.dimensions == [dim / heads / 2] else {
                throw .shapeMismatch(tensor: factors.name, expected: [dim / heads / 2], found: factors.dimensions, byteOffset: factors.infoOffset)
            }
            let values = Matrix.zeros(rows: 1, cols: dim / heads / 2)
            factors.type.decode(from: file.data, byteOffset: factors.dataOffset, into: values)
            config.ropeFrequencyFactors = values.toArray()
        }
        config.attentionBias = file.tensor(named: "blk.0.attn_q.bias") != nil
        return config
    }

    /// Reorders each head's rows (or, for a one-row bias, its values) from the half-split RoPE
    /// layout (pairs `i`, `i + headDim/2`) to the adjacent one (pairs `2i`, `2i + 1`).
    static func interleaveHalves(_ m: Matrix, headDim: Int) {
        let half = headDim / 2, original = Matrix.zeros(rows: m.rows, cols: m.cols)
        Kernels.copy(m, into: original)
        let vector = m.rows == 1, count = vector ? m.cols : m.rows
        for head in 0 ..< count / headDim {
            for i in 0 ..< half {
                for (to, from) in [(2 * i, i), (2 * i + 1, i + half)] {
                    let t = head * headDim + to, f = head * headDim + from
                    if vector { m[0, t] = original[0, f] } else { Kernels.copy(original.row(f), into: m.row(t)) }
                }
            }
        }
    }

    /// llama.cpp's name for the RoPE frequency divisors (``ModelConfig/ropeFrequencyFactors``).
    static let ropeFactorsTensor = "rope_freqs.weight"

    /// Every weight under its llama.cpp tensor name, as views into this model's storage: the norm
    /// gains (`vector`) and the matrices, Q, K, V and gate, up as row ranges of their fused ones.
    /// Nothing is copied, so a caller that wants float32 rows of packed or half matrices takes them
    /// one at a time (``WeightMatrix/floatMatrix()``).
    package func ggufTensors() -> [(name: String, matrix: WeightMatrix, vector: Bool)] {
        let h = config.hiddenDim
        var out = [(name: "token_embd.weight", matrix: tokenEmbedding, vector: false)]
        for (i, layer) in layers.enumerated() {
            out += [("blk.\(i).attn_norm.weight", WeightMatrix(layer.attentionNorm), true),
                    ("blk.\(i).attn_q.weight", layer.wq, false),
                    ("blk.\(i).attn_k.weight", layer.wk, false),
                    ("blk.\(i).attn_v.weight", layer.wv, false),
                    ("blk.\(i).attn_output.weight", layer.wo, false),
                    ("blk.\(i).ffn_norm.weight", WeightMatrix(layer.ffnNorm), true),
                    ("blk.\(i).ffn_gate.weight", layer.gateUp.rows(0 ..< h), false),
                    ("blk.\(i).ffn_up.weight", layer.gateUp.rows(h ..< 2 * h), false),
                    ("blk.\(i).ffn_down.weight", layer.down, false)]
            if let bias = layer.qkvBias {
                let d = config.dim, kv = config.kvDim
                out += [("blk.\(i).attn_q.bias", WeightMatrix(bias.columns(0 ..< d)), true),
                        ("blk.\(i).attn_k.bias", WeightMatrix(bias.columns(d ..< d + kv)), true),
                        ("blk.\(i).attn_v.bias", WeightMatrix(bias.columns(d + kv ..< d + 2 * kv)), true)]
            }
        }
        out.append(("output_norm.weight", WeightMatrix(finalNorm), true))
        if !config.sharedClassifier { out.append(("output.weight", classifier, false)) }
        return out
    }

    /// The model (and, when given, its tokenizer) as a GGUF version 3 file of the `llama`
    /// architecture, readable by ``gguf(at:precision:contextLength:memoryLimit:)`` and by llama.cpp.
    /// - Parameters:
    ///   - tokenizer: written as its kind of vocabulary: SentencePiece-style `llama` (spaces as `▁`)
    ///     or byte-level `gpt2`.
    ///   - tensorType: the matrices' encoding. Norms stay F32; with Q8_0, a matrix whose row
    ///     length is not a multiple of 32 is written as F16 (as llama.cpp's quantizer does).
    ///     Halfs are rounded as ``converted(to:)`` rounds them, but a weight (or a Q8_0 scale)
    ///     beyond their range is written as an infinity, not refused: call
    ///     ``checkRange(for:)`` first to refuse it.
    /// - Throws: ``ModelLoadError/unwritableEncoding(_:)`` for an encoding the package only reads.
    public func ggufData(tokenizer: Tokenizer? = nil, tensorType: GGUFTensorType = .f32) throws(ModelLoadError) -> Data {
        guard tensorType.isWritable else { throw .unwritableEncoding(tensorType) }
        var writer = ggufWriter(tokenizer: tokenizer, fileType: tensorType == .f16 ? 1 : tensorType == .q8_0 ? 7 : 0)
        for t in ggufTensors() {
            let type = t.vector ? .f32 : tensorType.encoding(forRowLength: t.matrix.cols)
            writer.add(t.name, t.matrix.floatMatrix(), type: type, vector: t.vector)
        }
        if let factors = config.ropeFrequencyFactors {
            writer.add(Self.ropeFactorsTensor, Matrix(rows: 1, cols: factors.count, values: factors), type: .f32, vector: true)
        }
        return writer.data()
    }

    /// A writer holding the model's metadata (and its tokenizer's), for its tensors to be added;
    /// `fileType` is llama.cpp's `LLAMA_FTYPE` for `general.file_type`.
    func ggufWriter(tokenizer: Tokenizer?, fileType: UInt32) -> GGUFWriter {
        let c = config
        var writer = GGUFWriter()
        writer.set("general.architecture", .string("llama"))
        writer.set("general.name", .string(c.name))
        writer.set("general.file_type", .uint32(fileType))
        for (key, value) in [("llama.context_length", c.declaredContextLength), ("llama.embedding_length", c.dim),
                             ("llama.block_count", c.layerCount), ("llama.feed_forward_length", c.hiddenDim),
                             ("llama.rope.dimension_count", c.headDim), ("llama.attention.head_count", c.headCount),
                             ("llama.attention.head_count_kv", c.kvHeadCount), ("llama.vocab_size", c.vocabSize)] {
            writer.set(key, .uint32(UInt32(value)))
        }
        writer.set("llama.attention.layer_norm_rms_epsilon", .float32(c.normEpsilon))
        writer.set("llama.rope.freq_base", .float32(c.ropeTheta))
        for (key, value) in tokenizer?.ggufMetadata() ?? [] { writer.set(key, value) }
        return writer
    }
}
