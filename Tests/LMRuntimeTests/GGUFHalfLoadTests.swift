import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// `ModelWeights.gguf(data:precision: .f16)`: each tensor decoded to float32 scratch and rounded
/// into half storage in turn must give exactly the weights of loading in float32 and converting.
@Suite struct GGUFHalfLoadTests {
    // 301 classifier rows are not whole packing groups, so the classifier stays in plain rows.
    static let config = Fixtures.tinyConfig(vocabSize: 301, dim: 64, layerCount: 2, sharedClassifier: false)

    @Test(arguments: [GGUFTensorType.f32, .f16, .q8_0])
    func gguf_halfPrecisionGivesTheBitsOfConvertingAFloatLoad(stored: GGUFTensorType) throws {
        let data = try Fixtures.tinyWeights(Self.config).ggufData(tensorType: stored)
        let direct = try ModelWeights.gguf(data: data, precision: .f16)
        let converted = try ModelWeights.gguf(data: data).converted(to: .f16)
        #expect(direct.precision == .f16 && direct.config == converted.config)
        #expect(ModelFingerprint(direct) == ModelFingerprint(converted))
        for (a, b) in zip(direct.ggufTensors(), converted.ggufTensors()) {
            #expect(a.name == b.name && a.matrix.packed == b.matrix.packed && a.matrix.finiteHalfs == b.matrix.finiteHalfs, "\(a.name)")
            #expect(a.matrix.floatMatrix().toArray().map(\.bitPattern) == b.matrix.floatMatrix().toArray().map(\.bitPattern), "\(a.name)")
            // Every projection is scanned for infinities and NaNs (the embedding is gathered, not multiplied).
            if a.name != "token_embd.weight", case .f16 = a.matrix.storage { #expect(a.matrix.finiteHalfs, "\(a.name)") }
        }
        let tokens = Fixtures.tokens(count: 9, vocabSize: Self.config.vocabSize, seed: 3)
        let x = Transformer(weights: direct), y = Transformer(weights: converted)
        #expect(try x.forward(tokens, cache: x.makeCache()).toArray() == y.forward(tokens, cache: y.makeCache()).toArray())
    }

    @Test func gguf_halfPrecisionCountsTheLoadingScratchAgainstTheLimit() throws {
        // A vocabulary far larger than the context: running needs little beside the weights, but
        // loading the embedding in halfs needs its float32 scratch, twice its half bytes, too.
        var config = Fixtures.tinyConfig(vocabSize: 20_000, contextLength: 8, dim: 32, layerCount: 1)
        let data = try Fixtures.tinyWeights(config).ggufData()
        config.weightPrecision = .f16
        let running = config.resourceEstimate().totalBytes, scratch = 4 * 20_000 * 32
        let loading = config.resourceEstimate().weightBytes + scratch
        #expect(running < loading)
        let expected = ModelLoadError.exceedsMemoryLimit(ResourceEstimate(weightBytes: config.resourceEstimate().weightBytes, scratchBytes: scratch,
                                                                          contextKVBytes: 0), limitBytes: loading - 1)
        #expect(throws: expected) { try ModelWeights.gguf(data: data, precision: .f16, memoryLimit: loading - 1) }
        #expect(try ModelWeights.gguf(data: data, precision: .f16, memoryLimit: loading).precision == .f16)
    }

    @Test func gguf_halfPrecisionRefusesAWeightBeyondTheHalfRangeAsConvertingDoes() throws {
        let weights = try Fixtures.tinyWeights(Self.config).unpackedCopy()   // plain rows, so the view below is the storage
        let target = try #require(weights.ggufTensors().first { $0.name == "blk.1.ffn_down.weight" })
        target.matrix.floatMatrix().base[5] = 70_000
        let data = try weights.ggufData()
        let expected = ModelLoadError.beyondHalfRange(tensor: "blk.1.ffn_down.weight", count: 1, largest: 70_000)
        #expect(throws: expected) { try ModelWeights.gguf(data: data).converted(to: .f16) }
        #expect(throws: expected) { try ModelWeights.gguf(data: data, precision: .f16) }
        #expect(try ModelWeights.gguf(data: data).precision == .f32)   // float32 holds it
    }
}
