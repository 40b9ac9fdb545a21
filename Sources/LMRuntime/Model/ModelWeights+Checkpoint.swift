import Foundation

extension ModelWeights {
    /// Bytes of the llama2.c checkpoint header: seven little-endian int32s.
    static let checkpointHeaderBytes = 28

    /// Loads a llama2.c ("version 0") checkpoint.
    ///
    /// The header is `dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len`
    /// (a negative vocab size means the classifier is stored at the end); float32
    /// tensors follow. The obsolete RoPE tables in the file are skipped and recomputed.
    /// - Parameters:
    ///   - url: the `.bin` file.
    ///   - memoryLimit: the most bytes running the model may need (``MemoryLimit``): a header
    ///     whose context or dimensions would need more is refused before anything is allocated.
    /// - Throws: ``ModelLoadError`` when the file is unreadable, its header impossible or too
    ///   large to run, or it is shorter than the header implies.
    public static func checkpoint(at url: URL, memoryLimit: Int = MemoryLimit.bytes) throws -> ModelWeights {
        let data = try ModelLoadError.mappedContents(of: url)
        return try checkpoint(data: data, path: url.path, memoryLimit: memoryLimit)
    }

    /// Loads a llama2.c checkpoint from its bytes (see ``checkpoint(at:memoryLimit:)``); `path`
    /// names it in errors and in the config (its file name becomes the model's name).
    public static func checkpoint(data: Data, path: String = "<memory>", memoryLimit: Int = MemoryLimit.bytes) throws -> ModelWeights {
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        let config = try checkpointConfig(data, path: path, name: name)
        try config.validate()
        try config.checkResources(limit: memoryLimit)   // before sizes are computed from the header, or anything allocated
        let c = config, l = c.layerCount
        let floatCount = c.vocabSize * c.dim + l * (2 * c.dim + 2 * c.dim * c.dim + 2 * c.kvDim * c.dim
            + 3 * c.dim * c.hiddenDim) + c.dim + c.contextLength * c.headDim + (c.sharedClassifier ? 0 : c.vocabSize * c.dim)
        let expected = checkpointHeaderBytes + 4 * floatCount
        guard data.count >= expected else {
            throw ModelLoadError.truncated(path: path, expectedBytes: expected, actualBytes: data.count)
        }
        let weights = try ModelWeights(zeroedFor: config, memoryLimit: memoryLimit)
        var offset = checkpointHeaderBytes
        func read(_ targets: [Matrix]) {
            for m in targets {
                Kernels.loadLittleEndianFloats(from: data, byteOffset: offset, into: m)
                offset += 4 * m.rows * m.cols
            }
        }
        let h = c.hiddenDim
        read([weights.tokenEmbedding.floats])
        read(weights.layers.map(\.attentionNorm))
        read(weights.layers.map(\.wq.floats))
        read(weights.layers.map(\.wk.floats))
        read(weights.layers.map(\.wv.floats))
        read(weights.layers.map(\.wo.floats))
        read(weights.layers.map(\.ffnNorm))
        read(weights.layers.map { $0.gateUp.rows(0 ..< h).floats })   // W1, the gate
        read(weights.layers.map(\.down.floats))                      // W2
        read(weights.layers.map { $0.gateUp.rows(h ..< 2 * h).floats }) // W3, the up projection
        read([weights.finalNorm])
        offset += 4 * c.contextLength * c.headDim             // obsolete cos and sin tables
        if !c.sharedClassifier { read([weights.classifier.floats]) }
        return weights.finishedLoading()
    }

    /// Parses and checks a checkpoint header.
    static func checkpointConfig(_ data: Data, path: String, name: String) throws -> ModelConfig {
        guard data.count >= checkpointHeaderBytes else {
            throw ModelLoadError.truncated(path: path, expectedBytes: checkpointHeaderBytes, actualBytes: data.count)
        }
        func int(_ i: Int) -> Int {
            let b = data.startIndex + 4 * i
            let bits = UInt32(data[b]) | UInt32(data[b + 1]) << 8 | UInt32(data[b + 2]) << 16 | UInt32(data[b + 3]) << 24
            return Int(Int32(bitPattern: bits))
        }
        let names = ["dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"]
        let header = (0 ..< 7).map(int)
        for (field, value) in zip(names, header) where value <= 0 && field != "vocab_size" {
            throw ModelLoadError.invalidDimensions("header field \(field) is \(value); it must be positive")
        }
        guard header[5] != 0 else { throw ModelLoadError.invalidDimensions("header field vocab_size is 0") }
        let config = ModelConfig(name: name, dim: header[0], hiddenDim: header[1], layerCount: header[2],
                                 headCount: header[3], kvHeadCount: header[4], vocabSize: abs(header[5]),
                                 contextLength: header[6], sharedClassifier: header[5] > 0,
                                 weights: .checkpoint(path: path))
        try config.validate()
        return config
    }
}

extension ModelWeights {
    /// The weights as a llama2.c checkpoint (the inverse of ``checkpoint(at:)``), so a
    /// synthetic model can be run by llama2.c or reloaded with `--checkpoint`.
    /// - Throws: ``ModelLoadError/unrepresentableInCheckpoint(_:)`` for a RoPE base other than
    ///   10,000, RoPE frequency factors, attention biases, an RMSNorm epsilon other than 1e-5 or a
    ///   context limited at load (``ModelConfig/trainedContextLength``), which the format cannot
    ///   record (a reader would run another model, or one with another fingerprint).
    public func checkpointData() throws(ModelLoadError) -> Data {
        let c = config, h = c.hiddenDim
        if c.ropeTheta != 10000 { throw .unrepresentableInCheckpoint("RoPE base \(c.ropeTheta) (it means 10,000)") }
        if c.ropeFrequencyFactors != nil { throw .unrepresentableInCheckpoint("RoPE frequency factors") }
        if c.attentionBias { throw .unrepresentableInCheckpoint("attention biases") }
        if c.normEpsilon != 1e-5 { throw .unrepresentableInCheckpoint("RMSNorm epsilon \(c.normEpsilon) (it means 1e-5)") }
        if let trained = c.trainedContextLength {
            throw .unrepresentableInCheckpoint("a context limited to \(c.contextLength) of the model's \(trained) positions (load it whole to convert it)")
        }
        var data = Data()
        let header = [c.dim, c.hiddenDim, c.layerCount, c.headCount, c.kvHeadCount,
                      c.sharedClassifier ? c.vocabSize : -c.vocabSize, c.contextLength]
        for value in header { withUnsafeBytes(of: Int32(value).littleEndian) { data.append(contentsOf: $0) } }
        func write(_ matrices: [Matrix]) { for m in matrices { Kernels.appendLittleEndianFloats(m, to: &data) } }
        write([tokenEmbedding.floatMatrix()])
        write(layers.map(\.attentionNorm))
        write(layers.map { $0.wq.floatMatrix() })
        write(layers.map { $0.wk.floatMatrix() })
        write(layers.map { $0.wv.floatMatrix() })
        write(layers.map { $0.wo.floatMatrix() })
        write(layers.map(\.ffnNorm))
        write(layers.map { $0.gateUp.rows(0 ..< h).floatMatrix() })
        write(layers.map { $0.down.floatMatrix() })
        write(layers.map { $0.gateUp.rows(h ..< 2 * h).floatMatrix() })
        write([finalNorm])
        // llama2.c's legacy format still carries its RoPE tables; store the real values.
        let tables = Matrix.zeros(rows: c.contextLength, cols: c.headDim / 2)
        Kernels.copy(ropeCos, into: tables)
        write([tables])
        Kernels.copy(ropeSin, into: tables)
        write([tables])
        if !c.sharedClassifier { write([classifier.floatMatrix()]) }
        return data
    }
}
