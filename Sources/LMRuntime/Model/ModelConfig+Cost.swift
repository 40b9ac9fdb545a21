extension ModelConfig {
    /// Multiply-adds × 2 in the weight matrices one token passes through (classifier excluded).
    public var layerMatmulFLOPsPerToken: Double {
        Double(2 * layerCount * (2 * dim * dim + 2 * kvDim * dim + 3 * dim * hiddenDim))
    }

    /// Floating-point operations of one forward pass of `newTokens` tokens after
    /// `cachedTokens` cached ones: the projections and MLP (`2 · T · weights`),
    /// attention scores and value mixing over the causally visible keys only, and
    /// the classifier for the last token. Norms, RoPE and softmax are not counted.
    public func forwardFLOPs(cachedTokens: Int, newTokens: Int) -> Double {
        let t = Double(newTokens), p = Double(cachedTokens)
        let visiblePairs = t * p + t * (t + 1) / 2           // Σ over new tokens of keys each one sees
        let attention = 2 * 2 * Double(headCount * headDim * layerCount) * visiblePairs
        return t * layerMatmulFLOPsPerToken + attention + Double(2 * dim * vocabSize)
    }

    /// Bytes of weights a decode step reads: every layer matrix and norm, the
    /// classifier and the final norm (one embedding row is not counted). Matrices count
    /// ``WeightPrecision/bytesPerWeight`` each (half for `.f16`); norm gains are float32.
    public var decodeWeightBytes: Int {
        let norms = layerCount * 2 * dim + dim
        return weightPrecision.bytesPerWeight * decodeMatrixWeights + MemoryLayout<Float>.stride * norms
    }

    /// Weights of the matrices a decode step reads (every layer matrix and the classifier): the
    /// halfs it converts when the weights are ``WeightPrecision/f16``.
    public var decodeMatrixWeights: Int {
        layerCount * (2 * dim * dim + 2 * kvDim * dim + 3 * dim * hiddenDim) + vocabSize * dim
    }
}
