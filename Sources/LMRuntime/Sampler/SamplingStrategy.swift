/// How the next token is chosen from logits.
public enum SamplingStrategy: Sendable, Equatable {
    /// The highest logit (the first on ties).
    case greedy
    /// A draw from `softmax(logits / temperature)`.
    case temperature(Float)
    /// A draw among the `k` most likely tokens, at `temperature`.
    case topK(Int, temperature: Float)
    /// A draw from the smallest set of most likely tokens whose probability exceeds `p` (nucleus), at `temperature`.
    case topP(Float, temperature: Float)
}
