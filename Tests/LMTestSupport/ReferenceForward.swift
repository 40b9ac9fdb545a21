import Foundation
import LMRuntime

/// The Llama forward pass written from its definition in double precision, one token at a
/// time, with no BLAS and no batching: the oracle the runtime's float32 kernels are measured
/// against on every kernel path (OpenBLAS core type, CPU-feature body, thread count).
///
/// It reads the same weights and RoPE tables as ``Transformer`` (the tables are float32 by
/// definition, as in llama2.c), so any difference comes from the runtime's arithmetic only.
public struct ReferenceForward {
    private let config: ModelConfig
    private let embedding: [[Double]], classifier: [[Double]], finalNorm: [Double]
    private let layers: [Layer]
    private let cos: [[Double]], sin: [[Double]]
    private var keys: [[[Double]]], values: [[[Double]]]   // [layer][position][kvDim]

    private struct Layer {
        let attentionNorm: [Double], ffnNorm: [Double]
        let wq, wk, wv, wo, gate, up, down: [[Double]]
    }

    /// A reference pass over `weights` with an empty cache.
    public init(_ weights: ModelWeights) {
        func rows(_ m: Matrix) -> [[Double]] {
            let flat = m.toArray().map(Double.init)
            return (0 ..< m.rows).map { Array(flat[$0 * m.cols ..< ($0 + 1) * m.cols]) }
        }
        func rows(_ m: WeightMatrix) -> [[Double]] {   // half weights: their exact float values
            let flat = m.toArray().map(Double.init)
            return (0 ..< m.rows).map { Array(flat[$0 * m.cols ..< ($0 + 1) * m.cols]) }
        }
        let h = weights.config.hiddenDim
        config = weights.config
        embedding = rows(weights.tokenEmbedding)
        classifier = rows(weights.classifier)
        finalNorm = rows(weights.finalNorm)[0]
        layers = weights.layers.map { l in
            let gateUp = rows(l.gateUp)
            return Layer(attentionNorm: rows(l.attentionNorm)[0], ffnNorm: rows(l.ffnNorm)[0],
                         wq: rows(l.wq), wk: rows(l.wk), wv: rows(l.wv), wo: rows(l.wo),
                         gate: Array(gateUp[0 ..< h]), up: Array(gateUp[h ..< 2 * h]), down: rows(l.down))
        }
        cos = rows(weights.ropeCos)
        sin = rows(weights.ropeSin)
        keys = Array(repeating: [], count: weights.config.layerCount)
        values = keys
    }

    /// Runs `tokens` after those already seen and returns the last token's logits.
    public mutating func forward(_ tokens: [Int]) -> [Double] {
        var x: [Double] = []
        for token in tokens { x = step(token) }
        return Self.apply(classifier, Self.rmsNorm(x, finalNorm, config.normEpsilon))
    }

    /// One token through every layer; returns the residual stream.
    private mutating func step(_ token: Int) -> [Double] {
        let c = config, position = keys[0].count, group = c.headCount / c.kvHeadCount
        var x = embedding[token]
        for (l, layer) in layers.enumerated() {
            let normed = Self.rmsNorm(x, layer.attentionNorm, c.normEpsilon)
            let q = rotate(Self.apply(layer.wq, normed), position)
            keys[l].append(rotate(Self.apply(layer.wk, normed), position))
            values[l].append(Self.apply(layer.wv, normed))
            var attended = [Double](repeating: 0, count: c.dim)
            for head in 0 ..< c.headCount {
                let qh = q[head * c.headDim ..< (head + 1) * c.headDim]
                let kvOffset = head / group * c.headDim
                let scores = keys[l].map { k in
                    zip(qh, k[kvOffset ..< kvOffset + c.headDim]).reduce(0) { $0 + $1.0 * $1.1 } / Double(c.headDim).squareRoot()
                }
                let top = scores.max() ?? 0, weights = scores.map { Foundation.exp($0 - top) }
                let total = weights.reduce(0, +)
                for (p, w) in weights.enumerated() {
                    for i in 0 ..< c.headDim { attended[head * c.headDim + i] += w / total * values[l][p][kvOffset + i] }
                }
            }
            x = zip(x, Self.apply(layer.wo, attended)).map(+)
            let ffnIn = Self.rmsNorm(x, layer.ffnNorm, c.normEpsilon)
            let gate = Self.apply(layer.gate, ffnIn), up = Self.apply(layer.up, ffnIn)
            let hidden = zip(gate, up).map { g, u in g / (1 + Foundation.exp(-g)) * u }
            x = zip(x, Self.apply(layer.down, hidden)).map(+)
        }
        return x
    }

    /// `w · v` for `w` stored `[out, in]`.
    private static func apply(_ w: [[Double]], _ v: [Double]) -> [Double] {
        w.map { row in zip(row, v).reduce(0) { $0 + $1.0 * $1.1 } }
    }

    private static func rmsNorm(_ x: [Double], _ gain: [Double], _ epsilon: Float) -> [Double] {
        let scale = 1 / (x.reduce(0) { $0 + $1 * $1 } / Double(x.count) + Double(epsilon)).squareRoot()
        return zip(x, gain).map { $0 * scale * $1 }
    }

    /// llama2.c's RoPE: adjacent pairs of each head rotated by the table's angle for `position`.
    private func rotate(_ v: [Double], _ position: Int) -> [Double] {
        var out = v
        for head in stride(from: 0, to: v.count, by: config.headDim) {
            for i in 0 ..< config.headDim / 2 {
                let a = v[head + 2 * i], b = v[head + 2 * i + 1], c = cos[position][i], s = sin[position][i]
                out[head + 2 * i] = a * c - b * s
                out[head + 2 * i + 1] = a * s + b * c
            }
        }
        return out
    }
}
