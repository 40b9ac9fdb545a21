/// Chooses tokens from logits with a ``SamplingStrategy`` and a seeded generator.
///
/// The same strategy, seed and logits always give the same tokens. Scratch is
/// allocated once per vocabulary size, so sampling in a decode loop does not allocate.
public struct Sampler {
    /// The strategy in use.
    public let strategy: SamplingStrategy
    private var rng: SeededGenerator
    private var probabilities: Matrix?
    private var order: [Int] = []

    /// A sampler.
    /// - Parameters:
    ///   - strategy: how to choose; a temperature of 0 means greedy.
    ///   - seed: seeds the draws.
    /// - Throws: ``SamplerError/invalidParameter(name:value:allowed:)`` for a negative or
    ///   non-finite temperature, `k < 1`, or `p` outside `(0, 1]`.
    public init(_ strategy: SamplingStrategy, seed: UInt64 = 0) throws {
        func check(_ ok: Bool, _ name: String, _ value: Double, _ allowed: String) throws {
            if !ok { throw SamplerError.invalidParameter(name: name, value: value, allowed: allowed) }
        }
        switch strategy {
        case .greedy: break
        case let .temperature(t):
            try check(t >= 0 && t.isFinite, "temperature", Double(t), "[0, ∞)")
        case let .topK(k, t):
            try check(k >= 1, "top-k", Double(k), "1...")
            try check(t >= 0 && t.isFinite, "temperature", Double(t), "[0, ∞)")
        case let .topP(p, t):
            try check(p > 0 && p <= 1, "top-p", Double(p), "(0, 1]")
            try check(t >= 0 && t.isFinite, "temperature", Double(t), "[0, ∞)")
        }
        self.strategy = strategy
        rng = SeededGenerator(seed: seed)
    }

    /// Picks a token from `logits` (`[1, vocabSize]`).
    public mutating func sample(_ logits: Matrix) -> Int {
        let temperature: Float
        switch strategy {
        case .greedy: return Kernels.argmax(logits)
        case let .temperature(t), let .topK(_, t), let .topP(_, t): temperature = t
        }
        if temperature == 0 { return Kernels.argmax(logits) }
        let n = logits.cols
        if probabilities?.cols != n {
            probabilities = .zeros(rows: 1, cols: n)
            order = Array(0 ..< n)
        }
        let p = probabilities!
        Kernels.copy(logits, into: p)
        for i in 0 ..< n { p[0, i] /= temperature }
        Kernels.softmax(p, row: 0, count: n)
        let coin = rng.nextUnitFloat()
        switch strategy {
        case let .topK(k, _): return drawFromTop(p, keep: { rank, _ in rank < k }, coin: coin)
        case let .topP(top, _): return drawFromTop(p, keep: { _, massBefore in massBefore < top }, coin: coin)
        default:
            var cumulative: Float = 0
            for i in 0 ..< n {
                cumulative += p[0, i]
                if coin < cumulative { return i }
            }
            return n - 1
        }
    }

    /// Sorts ids by probability and draws among the leading ones `keep` accepts.
    private mutating func drawFromTop(_ p: Matrix, keep: (_ rank: Int, _ massBefore: Float) -> Bool,
                                      coin: Float) -> Int {
        for i in order.indices { order[i] = i }
        order.sort { p[0, $0] > p[0, $1] || (p[0, $0] == p[0, $1] && $0 < $1) }
        var kept = 0, mass: Float = 0
        while kept < order.count, keep(kept, mass) {
            mass += p[0, order[kept]]
            kept += 1
        }
        let target = coin * mass
        var cumulative: Float = 0
        for rank in 0 ..< kept {
            cumulative += p[0, order[rank]]
            if target < cumulative { return order[rank] }
        }
        return order[kept - 1]
    }
}
