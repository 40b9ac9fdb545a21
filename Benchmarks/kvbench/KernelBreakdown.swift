import LMRuntime

/// One kernel's share of a prefill pass: timed alone, and inside a run of every layer in order.
struct KernelTime: Encodable {
    let kernel: String
    /// The step alone on layer 0, repeated: its data mostly warm in cache.
    let ms_per_layer: Double
    /// The step in a run of all layers in the pass's order, each with its own weights and cached
    /// keys and values, summed over the layers and divided by their count: the data is as cold
    /// as in a pass (the steps between evict it).
    let ms_per_layer_in_sequence: Double
}

/// Where a prefill of `tokens` tokens spends its time, step by step: each step of one layer run
/// alone on layer 0's weights at exactly the pass's shapes (best of `repeats` after a warm-up run),
/// and the same steps run through every layer in order with a clock around each (the run with the
/// least total of `repeats`). The first shows what a step costs with its data in cache, the
/// second what it costs inside a pass; what neither explains beside the measured pass is hand-offs
/// and the final norm and classifier.
struct KernelBreakdown {
    let repeats: Int

    /// - Parameters:
    ///   - tokens: the pass's new tokens.
    ///   - cachedTokens: keys already cached before them (attention reads those too).
    func measure(_ weights: ModelWeights, tokens n: Int, cachedTokens p: Int = 0) -> [KernelTime] {
        let c = weights.config
        let x = Matrix.zeros(rows: n, cols: c.dim), normed = Matrix.zeros(rows: n, cols: c.dim)
        let queries = Matrix.zeros(rows: n, cols: c.dim), attended = Matrix.zeros(rows: n, cols: c.dim)
        let cache = (0 ..< c.layerCount).map { l in
            let keys = Matrix.zeros(rows: p + n, cols: c.kvDim), values = Matrix.zeros(rows: p + n, cols: c.kvDim)
            Kernels.fillUniform(keys, seed: UInt64(9 + 2 * l), scale: 1)
            Kernels.fillUniform(values, seed: UInt64(10 + 2 * l), scale: 1)
            return (keys: keys, values: values)
        }
        let gateUp = Matrix.zeros(rows: n, cols: 2 * c.hiddenDim)
        for (i, m) in [x, queries, gateUp].enumerated() { Kernels.fillUniform(m, seed: UInt64(i + 1), scale: 1) }
        let scratch = AttentionScratch(headCount: c.headCount, kvHeadCount: c.kvHeadCount, headDim: c.headDim,
                                       contextLength: p + n, workers: Kernels.workerCount)
        let h = HalfScratch.needed(for: weights, maxBatch: n)   // as the transformer's
        func steps(_ l: Int) -> [(String, () -> Void)] {
            let layer = weights.layers[l], allKeys = cache[l].keys, allValues = cache[l].values
            let keys = allKeys.rows(p ..< p + n), values = allValues.rows(p ..< p + n)
            return [
                ("attention norm", { Kernels.rmsNorm(x, weight: layer.attentionNorm, epsilon: c.normEpsilon, into: normed) }),
                ("Q|K|V", { Kernels.matmul(normed, transposed: layer.qkv, into: queries, keys, values, scratch: h) }),
                ("RoPE", {
                    Kernels.rope(queries, headDim: c.headDim, startPosition: p, cos: weights.ropeCos, sin: weights.ropeSin)
                    Kernels.rope(keys, headDim: c.headDim, startPosition: p, cos: weights.ropeCos, sin: weights.ropeSin)
                }),
                ("attention", {
                    Kernels.causalAttention(queries: queries, keys: allKeys, values: allValues, output: attended, scratch: scratch,
                                            headCount: c.headCount, kvHeadCount: c.kvHeadCount)
                }),
                ("O + residual", { Kernels.matmul(attended, transposed: layer.wo, into: x, beta: 1, scratch: h) }),
                ("FFN norm", { Kernels.rmsNorm(x, weight: layer.ffnNorm, epsilon: c.normEpsilon, into: normed) }),
                ("gate|up", { Kernels.matmul(normed, transposed: layer.gateUp, into: gateUp, scratch: h) }),
                ("SwiGLU", { Kernels.swiGLU(gateUp) }),
                ("down + residual", {
                    Kernels.matmul(gateUp.columns(0 ..< c.hiddenDim), transposed: layer.down, into: x, beta: 1, scratch: h)
                }),
            ]
        }
        let alone = steps(0).map { _, step in
            step()
            return (0 ..< max(1, repeats)).map { _ in seconds(step) }.min()!
        }
        let layers = (0 ..< c.layerCount).map(steps)
        func runInOrder() -> [Double] {
            var sums = [Double](repeating: 0, count: alone.count)
            for layer in layers {
                for (i, step) in layer.enumerated() { sums[i] += seconds(step.1) }
            }
            return sums
        }
        var inOrder = runInOrder()
        for _ in 1 ..< max(1, repeats) {
            let run = runInOrder()
            if run.reduce(0, +) < inOrder.reduce(0, +) { inOrder = run }
        }
        return alone.indices.map { i in
            KernelTime(kernel: layers[0][i].0, ms_per_layer: alone[i] * 1000,
                       ms_per_layer_in_sequence: inOrder[i] * 1000 / Double(c.layerCount))
        }
    }
}
