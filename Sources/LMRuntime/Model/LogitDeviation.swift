import Foundation

/// How far one model's next-token logits stray from a reference model's on the same tokens: what
/// rounding the weights (``WeightPrecision/f16``) costs.
///
/// Both models read the same sequence, the reference's own greedy continuation of a prompt, one
/// token at a time; at every position the two logit vectors are compared. A second, free-running
/// greedy generation of the candidate says how long it keeps choosing exactly the reference's
/// tokens.
public struct LogitDeviation: Sendable, Equatable, Codable {
    /// Positions compared (the generated tokens).
    public var positions: Int
    /// The largest `|candidate − reference|` over every logit at every position.
    public var maxAbsoluteError: Double
    /// The largest logit magnitude of the reference, for scale.
    public var maxReferenceLogit: Double
    /// Mean over positions of KL(reference ‖ candidate) of the next-token distributions (softmax
    /// at temperature 1), in nats.
    public var meanKLDivergence: Double
    /// The largest of those per-position divergences, in nats.
    public var maxKLDivergence: Double
    /// Fraction of positions where both models' most likely next token is the same.
    public var argmaxAgreement: Double
    /// Tokens the candidate's own greedy generation shares with the reference's before the first
    /// difference (equal to ``positions`` when they never differ).
    public var identicalGreedyPrefix: Int

    /// Compares `candidate` with `reference` over `tokens` greedy tokens after `prompt`.
    /// - Parameters:
    ///   - candidate: the model under test (e.g. the same weights in f16).
    ///   - reference: the model it is held to (e.g. f32).
    ///   - prompt: the tokens both start from (non-empty).
    ///   - tokens: positions to compare; capped so that prompt and continuation fit both contexts.
    /// - Throws: ``RuntimeError`` for an empty prompt or ids outside either vocabulary.
    public static func measure(_ candidate: Transformer, against reference: Transformer, prompt: [Int],
                               tokens: Int) throws -> LogitDeviation {
        precondition(candidate.config.vocabSize == reference.config.vocabSize, "the models must share a vocabulary")
        let steps = max(0, min(tokens, min(candidate.config.contextLength, reference.config.contextLength) - prompt.count))
        let a = reference.makeCache(), b = candidate.makeCache()
        var p = try reference.forward(prompt, cache: a).toArray(), q = try candidate.forward(prompt, cache: b).toArray()
        var out = LogitDeviation(positions: 0, maxAbsoluteError: 0, maxReferenceLogit: 0, meanKLDivergence: 0,
                                 maxKLDivergence: 0, argmaxAgreement: 0, identicalGreedyPrefix: 0)
        var agreeing = 0, sequence: [Int] = []
        for step in 0 ..< steps {
            let chosen = argmax(p)
            let divergence = klDivergence(p, q)
            out.maxAbsoluteError = max(out.maxAbsoluteError, zip(p, q).map { Double(abs($0 - $1)) }.max() ?? 0)
            out.maxReferenceLogit = max(out.maxReferenceLogit, p.map { Double(abs($0)) }.max() ?? 0)
            out.meanKLDivergence += divergence
            out.maxKLDivergence = max(out.maxKLDivergence, divergence)
            if argmax(q) == chosen { agreeing += 1 }
            sequence.append(chosen)
            out.positions += 1
            guard step + 1 < steps else { break }
            p = try reference.forward([chosen], cache: a).toArray()
            q = try candidate.forward([chosen], cache: b).toArray()
        }
        if out.positions > 0 {
            out.meanKLDivergence /= Double(out.positions)
            out.argmaxAgreement = Double(agreeing) / Double(out.positions)
        }
        // The candidate on its own: greedy until it first leaves the reference's sequence.
        let free = candidate.makeCache()
        var logits = try candidate.forward(prompt, cache: free).toArray()
        for (i, expected) in sequence.enumerated() {
            guard argmax(logits) == expected else { break }
            out.identicalGreedyPrefix += 1
            if i + 1 < sequence.count { logits = try candidate.forward([expected], cache: free).toArray() }
        }
        return out
    }

    static func argmax(_ x: [Float]) -> Int {
        x.indices.max { x[$0] < x[$1] || (x[$0] == x[$1] && $0 > $1) } ?? 0   // lowest index on ties
    }

    /// KL(softmax(p) ‖ softmax(q)) in nats, computed in double precision.
    static func klDivergence(_ p: [Float], _ q: [Float]) -> Double {
        func logSoftmax(_ x: [Float]) -> [Double] {
            let m = Double(x.max() ?? 0)
            let logSum = Foundation.log(x.reduce(0.0) { $0 + Foundation.exp(Double($1) - m) }) + m
            return x.map { Double($0) - logSum }
        }
        let lp = logSoftmax(p), lq = logSoftmax(q)
        return max(0, zip(lp, lq).reduce(0.0) { $0 + Foundation.exp($1.0) * ($1.0 - $1.1) })
    }
}
