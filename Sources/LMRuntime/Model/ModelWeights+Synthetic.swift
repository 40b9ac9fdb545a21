import Dispatch

extension ModelWeights {
    /// Deterministic random weights for `config`, generated from `seed`.
    ///
    /// Each matrix draws from its own stream (derived from the seed and its
    /// index), so generation runs in parallel and gives the same floats on every
    /// machine. Scales keep activations finite over the whole context:
    /// projections preserve unit variance, the two projections that feed the
    /// residual stream are damped by `1/sqrt(2 · layerCount)`, embeddings have unit
    /// variance, and the classifier gives logits a standard deviation near 2.5.
    /// A shared classifier would make every token predict itself (its own
    /// embedding dominates the residual), so the bundled configs keep it separate.
    /// - Parameters:
    ///   - config: the dimensions.
    ///   - seed: the generator's seed.
    ///   - memoryLimit: the most bytes running the model may need (``MemoryLimit``).
    /// - Throws: ``ModelLoadError/invalidDimensions(_:)`` when the config is impossible,
    ///   ``ModelLoadError/exceedsMemoryLimit(_:limitBytes:)`` when it would not fit.
    public static func synthetic(_ config: ModelConfig, seed: UInt64, memoryLimit: Int = MemoryLimit.bytes) throws -> ModelWeights {
        guard config.weightPrecision == .f32 else {   // generated in float32, then rounded once
            var f32 = config
            f32.weightPrecision = .f32
            return try synthetic(f32, seed: seed, memoryLimit: memoryLimit).converted(to: config.weightPrecision, memoryLimit: memoryLimit)
        }
        let weights = try ModelWeights(zeroedFor: config, memoryLimit: memoryLimit)
        let residualDamping = 1 / Float(2 * config.layerCount).squareRoot()
        func unit(_ fanIn: Int) -> Float { (3 / Float(fanIn)).squareRoot() }
        var jobs: [(Matrix, Float)] = [(weights.tokenEmbedding.floats, Float(3).squareRoot())]
        for layer in weights.layers {
            jobs += [(layer.wq.floats, unit(config.dim)), (layer.wk.floats, unit(config.dim)), (layer.wv.floats, unit(config.dim)),
                     (layer.wo.floats, unit(config.dim) * residualDamping), (layer.gateUp.floats, unit(config.dim)),
                     (layer.down.floats, unit(config.hiddenDim) * residualDamping)]
            Kernels.fill(layer.attentionNorm, with: 1)
            Kernels.fill(layer.ffnNorm, with: 1)
        }
        if !config.sharedClassifier { jobs.append((weights.classifier.floats, 2.5 * unit(config.dim))) }
        for layer in weights.layers { if let bias = layer.qkvBias { jobs.append((bias, 0.5)) } }   // last: other streams unchanged
        Kernels.fill(weights.finalNorm, with: 1)
        // Split big matrices into row bands so both cores stay busy; each band has its own stream.
        var bands: [(Matrix, UInt64, Float)] = []
        let bandRows = 256
        for (index, (matrix, scale)) in jobs.enumerated() {
            for start in stride(from: 0, to: matrix.rows, by: bandRows) {
                let stream = UInt64(index) << 32 | UInt64(start / bandRows)
                bands.append((matrix.rows(start ..< min(matrix.rows, start + bandRows)),
                              SeededGenerator.derive(seed, stream: stream), scale))
            }
        }
        let work = bands
        DispatchQueue.concurrentPerform(iterations: work.count) { i in
            Kernels.fillUniform(work[i].0, seed: work[i].1, scale: work[i].2)
        }
        return weights.finishedLoading()
    }
}
