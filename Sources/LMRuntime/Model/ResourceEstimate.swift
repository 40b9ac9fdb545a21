/// What running a model costs in memory, computed from its config before anything is allocated:
/// the weights, one transformer's scratch for its batch, and one sequence's K/V over the whole
/// context (the most a session can grow to).
public struct ResourceEstimate: Sendable, Equatable, CustomStringConvertible {
    /// Bytes of weights (and the RoPE tables).
    public var weightBytes: Int
    /// Bytes of one transformer's scratch at its batch size (activations, attention scores).
    public var scratchBytes: Int
    /// Bytes of one sequence's K/V when it fills the context.
    public var contextKVBytes: Int

    /// All three (saturating: absurd configs give `Int.max`, never an overflow).
    public var totalBytes: Int {
        let (partial, o1) = weightBytes.addingReportingOverflow(scratchBytes)
        let (total, o2) = partial.addingReportingOverflow(contextKVBytes)
        return o1 || o2 ? .max : total
    }

    /// E.g. `weights 412 MB + scratch 42 MB + full-context K/V 101 MB = 555 MB`.
    public var description: String {
        func mb(_ bytes: Int) -> String { bytes == .max ? "more than 9 EB" : "\(bytes / 1_000_000) MB" }
        return "weights \(mb(weightBytes)) + scratch \(mb(scratchBytes)) + full-context K/V \(mb(contextKVBytes)) = \(mb(totalBytes))"
    }
}

extension ModelConfig {
    /// The memory a model with this config needs to run one sequence, before allocating any.
    /// - Parameters:
    ///   - maxBatch: tokens per pass of the transformer (its scratch grows with it).
    ///   - workers: threads the attention scratch is sized for.
    /// - Complexity: O(1); computed in `Double` and saturated, so absurd headers cannot overflow it.
    public func resourceEstimate(maxBatch: Int = Transformer.defaultMaxBatch,
                                 workers: Int = Transformer.workerCount) -> ResourceEstimate {
        let float = Double(MemoryLayout<Float>.stride)
        let batch = Double(max(1, min(maxBatch, contextLength)))
        // Norm gains and the cos and sin tables are float32; the matrices take the precision's bytes.
        let vectors = Double(layerCount) * 2 * Double(dim) + Double(dim)
        let weights = vectors + (parameterMagnitude - vectors) * Double(weightPrecision.bytesPerWeight) / float
            + Double(contextLength) * Double(headDim)
            + (attentionBias ? Double(layerCount) * Double(dim + 2 * kvDim) : 0)
        let attentionRows = Double(min(max(1, workers), kvHeadCount)) * Double(headCount / max(1, kvHeadCount))
            * Double(Kernels.attentionBlockRows)
        let scratch = batch * (4 * Double(dim) + 2 * Double(hiddenDim)) + Double(vocabSize)
            + attentionRows * (Double(min(contextLength, Kernels.attentionKeyTile)) + 2 * Double(headDim) + 2)
            + ((weightPrecision == .f16 && Int(batch) >= Kernels.halfConversionRows)   // half weights' conversion blocks,
                || (ModelWeights.packsWeights && Int(batch) > Kernels.skinnyRowLimit)    // packed weights' unpacking blocks
                ? Double(Kernels.workerCount * Kernels.halfBlockRows) * Double(max(dim, hiddenDim)) : 0)
        let kv = 2 * Double(layerCount) * Double(kvHeadCount) * Double(dim / max(1, headCount)) * Double(contextLength)
        func bytes(_ floats: Double) -> Int { floats * float >= Double(Int.max) ? .max : Int(floats * float) }
        return ResourceEstimate(weightBytes: bytes(weights), scratchBytes: bytes(scratch), contextKVBytes: bytes(kv))
    }

    /// Throws unless running this model fits in `limit` bytes.
    /// - Throws: ``ModelLoadError/exceedsMemoryLimit(_:limitBytes:)`` with the estimate.
    public func checkResources(limit: Int = MemoryLimit.bytes) throws {
        let estimate = resourceEstimate()
        guard estimate.totalBytes <= limit else { throw ModelLoadError.exceedsMemoryLimit(estimate, limitBytes: limit) }
    }
}
