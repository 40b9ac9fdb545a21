import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Q, K and V biases (`ModelConfig.attentionBias`) and Qwen2's GGUF files (architecture `qwen2`,
/// Q and K in the half-split RoPE order).
struct AttentionBiasTests {
    static func config(bias: Bool) -> ModelConfig {
        var config = Fixtures.tinyConfig(dim: 64, layerCount: 2, sharedClassifier: false)
        config.attentionBias = bias
        return config
    }

    static let tokens = Fixtures.tokens(count: 30, vocabSize: 300, seed: 8)

    static func logits(_ weights: ModelWeights) throws -> [Float] {
        let model = Transformer(weights: weights)
        return try model.forward(tokens, cache: model.makeCache()).toArray()
    }

    @Test func forward_addsTheBiasesAndZeroBiasesChangeNothing() throws {
        let biased = Fixtures.tinyWeights(Self.config(bias: true)), plain = Fixtures.tinyWeights(Self.config(bias: false))
        #expect(biased.layers.allSatisfy { $0.qkvBias != nil } && plain.layers.allSatisfy { $0.qkvBias == nil })
        #expect(try Self.logits(biased) != Self.logits(plain))
        #expect(ModelFingerprint(biased) != ModelFingerprint(plain))
        for layer in biased.layers { Kernels.fill(layer.qkvBias!, with: 0) }
        #expect(try Self.logits(biased) == Self.logits(plain))   // the same matrices: synthetic streams unchanged
    }

    @Test func gguf_writesAndReadsTheBiases() throws {
        let weights = Fixtures.tinyWeights(Self.config(bias: true))
        let read = try ModelWeights.gguf(data: weights.ggufData())
        #expect(read.config.attentionBias)
        #expect(try Self.logits(read) == Self.logits(weights))
        #expect(throws: ModelLoadError.unrepresentableInCheckpoint("attention biases")) { try weights.checkpointData() }
    }

    /// `values` of one head-stacked tensor from adjacent RoPE pairs back to Hugging Face's half-split order.
    static func halfSplit(_ values: [Float], rows: Int, cols: Int, headDim: Int) -> [Float] {
        var out = values
        let half = headDim / 2
        for head in 0 ..< rows / headDim {
            for i in 0 ..< half {
                for (split, adjacent) in [(i, 2 * i), (i + half, 2 * i + 1)] {
                    let to = (head * headDim + split) * cols, from = (head * headDim + adjacent) * cols
                    out[to ..< to + cols] = values[from ..< from + cols]
                }
            }
        }
        return out
    }

    /// `weights` as a Qwen2 GGUF file: `qwen2.*` keys, Q and K (and their biases) in half-split
    /// order unless `reordered` is false.
    static func qwen2File(_ weights: ModelWeights, reordered: Bool = true) -> Data {
        let c = weights.config
        var writer = GGUFWriter()
        writer.set("general.architecture", .string("qwen2"))
        for (key, value) in [("context_length", c.contextLength), ("embedding_length", c.dim), ("block_count", c.layerCount),
                             ("feed_forward_length", c.hiddenDim), ("attention.head_count", c.headCount),
                             ("attention.head_count_kv", c.kvHeadCount)] {
            writer.set("qwen2.\(key)", .uint32(UInt32(value)))
        }
        writer.set("qwen2.attention.layer_norm_rms_epsilon", .float32(c.normEpsilon))
        writer.set("qwen2.rope.freq_base", .float32(c.ropeTheta))
        for t in weights.ggufTensors() {
            var values = t.matrix.floatMatrix().toArray()
            if reordered, [".attn_q.", ".attn_k."].contains(where: t.name.contains) {
                // A bias has one value per row of its matrix.
                let (rows, cols) = t.vector ? (t.matrix.cols, 1) : (t.matrix.rows, t.matrix.cols)
                values = Self.halfSplit(values, rows: rows, cols: cols, headDim: c.headDim)
            }
            writer.add(t.name, Matrix(rows: t.matrix.rows, cols: t.matrix.cols, values: values), type: .f32, vector: t.vector)
        }
        return writer.data()
    }

    @Test func gguf_readsAQwen2FileInHalfSplitOrder() throws {
        let weights = Fixtures.tinyWeights(Self.config(bias: true))
        let read = try ModelWeights.gguf(data: Self.qwen2File(weights))
        #expect(read.config.attentionBias && read.config.dim == weights.config.dim)
        #expect(try Self.logits(read) == Self.logits(weights))
        for precision in [WeightPrecision.f16] {   // the half path reorders its scratch the same way
            let halfs = try ModelWeights.gguf(data: Self.qwen2File(weights), precision: precision)
            #expect(try Self.logits(halfs) == Self.logits(weights.converted(to: precision)))
        }
        // The same rows left in adjacent order are another model: the reordering is what makes them equal.
        #expect(try Self.logits(ModelWeights.gguf(data: Self.qwen2File(weights, reordered: false))) != Self.logits(weights))
    }
}
