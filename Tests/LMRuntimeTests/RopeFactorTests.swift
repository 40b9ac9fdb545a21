import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Llama 3.1's RoPE frequency factors (`ModelConfig.ropeFrequencyFactors`, GGUF `rope_freqs.weight`).
struct RopeFactorTests {
    static func config(_ factors: [Float]?) -> ModelConfig {
        var config = Fixtures.tinyConfig(dim: 64, layerCount: 2, sharedClassifier: false)   // headDim 16: 8 frequencies
        config.ropeFrequencyFactors = factors
        return config
    }

    static let factors: [Float] = [1, 1, 1.5, 2, 4, 8, 8, 32]

    @Test func ropeTables_divideEachFrequencyByItsFactor() {
        let weights = Fixtures.tinyWeights(Self.config(Self.factors))
        let c = weights.config
        for position in [0, 1, 7, 95] {
            for i in 0 ..< c.headDim / 2 {
                let frequency = 1 / Foundation.powf(c.ropeTheta, Float(2 * i) / Float(c.headDim)) / Self.factors[i]
                #expect(weights.ropeCos[position, i] == Foundation.cosf(Float(position) * frequency))
                #expect(weights.ropeSin[position, i] == Foundation.sinf(Float(position) * frequency))
            }
        }
    }

    @Test func forward_withUnitFactorsIsPlainRoPEAndOtherFactorsAreNot() throws {
        let tokens = Fixtures.tokens(count: 40, vocabSize: 300, seed: 5)
        func logits(_ factors: [Float]?) throws -> [Float] {
            let model = Transformer(weights: Fixtures.tinyWeights(Self.config(factors)))
            return try model.forward(tokens, cache: model.makeCache()).toArray()
        }
        let plain = try logits(nil)
        #expect(try logits([Float](repeating: 1, count: 8)) == plain)
        #expect(try logits(Self.factors) != plain)
        // The first position is not rotated at all, whatever the factors.
        let first = Transformer(weights: Fixtures.tinyWeights(Self.config(Self.factors)))
        let plainFirst = Transformer(weights: Fixtures.tinyWeights(Self.config(nil)))
        #expect(try first.forward([tokens[0]], cache: first.makeCache()).toArray() == plainFirst.forward([tokens[0]], cache: plainFirst.makeCache()).toArray())
    }

    @Test func gguf_keepsTheFactorsAndTheModel() throws {
        let weights = Fixtures.tinyWeights(Self.config(Self.factors))
        let file = try GGUFFile(data: weights.ggufData())
        #expect(file.tensor(named: "rope_freqs.weight")?.dimensions == [8])
        let read = try ModelWeights.gguf(data: weights.ggufData())
        #expect(read.config.ropeFrequencyFactors == Self.factors)
        #expect(ModelFingerprint(read) != ModelFingerprint(try ModelWeights.gguf(data: Fixtures.tinyWeights(Self.config(nil)).ggufData())))
        let tokens = Fixtures.tokens(count: 20, vocabSize: 300, seed: 6)
        let a = Transformer(weights: weights), b = Transformer(weights: read)
        #expect(try a.forward(tokens, cache: a.makeCache()).toArray() == b.forward(tokens, cache: b.makeCache()).toArray())
        // A plain model's file has no such tensor, and its config no such key (fingerprints as before).
        let plain = Fixtures.tinyWeights(Self.config(nil))
        #expect(try GGUFFile(data: plain.ggufData()).tensor(named: "rope_freqs.weight") == nil)
        #expect(try !String(decoding: JSONEncoder().encode(plain.config), as: UTF8.self).contains("ropeFrequencyFactors"))
        let json = try JSONEncoder().encode(weights.config)
        #expect(try JSONDecoder().decode(ModelConfig.self, from: json) == weights.config)
    }

    @Test func gguf_refusesFactorsOfTheWrongShapeOrValue() throws {
        let weights = Fixtures.tinyWeights(Self.config(nil))
        func file(_ factors: [Float]) throws -> Data {
            var writer = weights.ggufWriter(tokenizer: nil, fileType: 0)
            for t in weights.ggufTensors() { writer.add(t.name, t.matrix.floatMatrix(), type: .f32, vector: t.vector) }
            writer.add("rope_freqs.weight", Matrix(rows: 1, cols: factors.count, values: factors), type: .f32, vector: true)
            return writer.data()
        }
        let short = try file([1, 2, 3])
        #expect(throws: ModelLoadError.gguf(path: "<memory>", .shapeMismatch(tensor: "rope_freqs.weight", expected: [8], found: [3],
                                                                                 byteOffset: try GGUFFile(data: short).tensor(named: "rope_freqs.weight")!.infoOffset))) {
            try ModelWeights.gguf(data: short)
        }
        for bad: Float in [0, -1, .nan, .infinity] {
            let error = #expect(throws: ModelLoadError.self) { try ModelWeights.gguf(data: file([1, 1, 1, bad, 1, 1, 1, 1])) }
            #expect("\(error!)".contains("ropeFrequencyFactors[3]"), "\(error!)")
        }
    }

    @Test func checkpointData_refusesWhatTheFormatCannotRecord() throws {
        #expect(throws: ModelLoadError.unrepresentableInCheckpoint("RoPE frequency factors")) {
            try Fixtures.tinyWeights(Self.config(Self.factors)).checkpointData()
        }
        var theta = Self.config(nil)
        theta.ropeTheta = 500_000
        #expect(throws: ModelLoadError.self) { try Fixtures.tinyWeights(theta).checkpointData() }
        var epsilon = Self.config(nil)
        epsilon.normEpsilon = 1e-6
        #expect(throws: ModelLoadError.self) { try Fixtures.tinyWeights(epsilon).checkpointData() }
        #expect(try !Fixtures.tinyWeights(Self.config(nil)).checkpointData().isEmpty)
    }
}
