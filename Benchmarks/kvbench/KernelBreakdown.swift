import LMRuntime

/// One kernel's share of a prefill pass, timed alone at the pass's shapes.
struct KernelTime: Encodable {
    let kernel: String
    let ms_per_layer: Double
}

/// Where a prefill of `tokens` tokens spends its time: each step of one layer, run alone on
/// layer 0's weights at exactly the pass's shapes (best of `repeats` after a warm-up run).
/// The sum beside the measured pass time per layer shows what the steps alone do not explain
/// (hand-offs between them, caches cooled by the other steps).
struct KernelBreakdown {
    let repeats: Int

    /// - Parameters:
    ///   - tokens: the pass's new tokens.
    ///   - cachedTokens: keys already cached before them (attention reads those too).
    func measure(_ weights: ModelWeights, tokens n: Int, cachedTokens p: Int = 0) -> [KernelTime] {
        let c = weights.config, layer = weights.layers[0]
        let x = Matrix.zeros(rows: n, cols: c.dim), normed = Matrix.zeros(rows: n, cols: c.dim)
        let queries = Matrix.zeros(rows: n, cols: c.dim), attended = Matrix.zeros(rows: n, cols: c.dim)
        let allKeys = Matrix.zeros(rows: p + n, cols: c.kvDim), allValues = Matrix.zeros(rows: p + n, cols: c.kvDim)
        let keys = allKeys.rows(p ..< p + n), values = allValues.rows(p ..< p + n)
        Kernels.fillUniform(allKeys, seed: 9, scale: 1)
        Kernels.fillUniform(allValues, seed: 10, scale: 1)
        let gateUp = Matrix.zeros(rows: n, cols: 2 * c.hiddenDim)
        for (i, m) in [x, queries, gateUp].enumerated() { Kernels.fillUniform(m, seed: UInt64(i + 1), scale: 1) }
        let scratch = AttentionScratch(headCount: c.headCount, kvHeadCount: c.kvHeadCount, headDim: c.headDim,
                                       contextLength: p + n, workers: Kernels.workerCount)
        let h = c.weightPrecision == .f16 ? HalfScratch(width: max(c.dim, c.hiddenDim)) : nil   // as the transformer's
        let steps: [(String, () -> Void)] = [
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
        return steps.map { name, step in
            step()
            let best = (0 ..< max(1, repeats)).map { _ in seconds(step) }.min()!
            return KernelTime(kernel: name, ms_per_layer: best * 1000)
        }
    }
}
