import Foundation
import LMRuntime
import LMTestSupport
import Testing

struct ModelCatalogTests {
    let catalog = Fixtures.bundledCatalog

    @Test func bundled_configsDescribeTheDocumentedModels() throws {
        #expect(catalog.names == ["base", "small", "tiny"])
        let base = try catalog.config(named: "base"), small = try catalog.config(named: "small")
        #expect(base.kvHeadCount < base.headCount && base.contextLength == 4096 && base.dim == 768 && base.layerCount == 12)
        #expect((90_000_000 ... 110_000_000).contains(base.parameterCount))
        #expect(small.dim == 288 && small.layerCount == 6)
        for name in catalog.names {
            let config = try catalog.config(named: name)
            #expect(config.tokenizer == "tokenizer.bin")
            #expect(try catalog.tokenizer(for: config).vocabSize == config.vocabSize)
            guard case .synthetic = config.weights else { Issue.record("\(name) should be synthetic"); continue }
        }
    }

    @Test func synthetic_sameSeedSameWeightsOtherSeedOtherWeights() throws {
        let config = try catalog.config(named: "tiny")
        let a = try ModelWeights.synthetic(config, seed: 1), b = try ModelWeights.synthetic(config, seed: 1)
        let c = try ModelWeights.synthetic(config, seed: 2)
        #expect(a.layers[1].gateUp.toArray() == b.layers[1].gateUp.toArray())
        #expect(a.classifier.toArray() == b.classifier.toArray())
        #expect(a.layers[1].gateUp.toArray() != c.layers[1].gateUp.toArray())
    }

    /// A fixed sample of the generator's output: the same floats on every machine and run.
    @Test func synthetic_firstWeightsArePinned() throws {
        let weights = try ModelWeights.synthetic(Fixtures.tinyConfig(), seed: 7)
        var rng = SeededGenerator(seed: SeededGenerator.derive(7, stream: 0))
        let scale = Float(3).squareRoot()
        let expected = (0 ..< 5).map { _ in (rng.nextUnitFloat() * 2 - 1) * scale }
        #expect(Array(weights.tokenEmbedding.row(0).toArray().prefix(5)) == expected)
        var zero = SeededGenerator(seed: 0)
        #expect(zero.next() == 0xE220_A839_7B1D_CDAF)   // SplitMix64's published first output for seed 0
    }

    @Test func bundledTiny_generatesFiniteVariedText() throws {
        let config = try catalog.config(named: "tiny")
        let model = Transformer(weights: try catalog.weights(for: config))
        let tokenizer = try catalog.tokenizer(for: config)
        var sampler = try Sampler(.temperature(1), seed: 5)
        let out = try model.generate(prompt: tokenizer.encode("Suggest a recipe using"), maxNewTokens: 24,
                                     sampler: &sampler, cache: model.makeCache(), stopTokens: [])
        #expect(out.generatedTokens.count == 24)
        #expect(Set(out.generatedTokens).count > 12, "a synthetic model should not repeat one token")
    }

    /// A config naming a GGUF file and no tokenizer: one read gives what the two separate loads
    /// give (the file's weights in the config's precision, its vocabulary); a config naming a
    /// tokenizer file has that one.
    @Test func model_aGGUFConfigGivesTheFilesWeightsAndVocabulary() throws {
        let directory = Fixtures.temporaryFile("catalog-model")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let vocabulary = try Tokenizer(ggufAt: Fixtures.toolTagsVocabulary)
        var config = Fixtures.tinyConfig(vocabSize: vocabulary.vocabSize)
        try Fixtures.tinyWeights(config).ggufData(tokenizer: vocabulary).write(to: directory.appendingPathComponent("m.gguf"))
        let catalog = ModelCatalog(directory: directory)
        config.weights = .gguf(path: "m.gguf")
        config.tokenizer = nil
        for precision in [WeightPrecision.f32, .f16] {
            config.weightPrecision = precision
            let (weights, tokenizer) = try catalog.model(for: config)
            #expect(weights.precision == precision)
            #expect(ModelFingerprint(weights) == ModelFingerprint(try catalog.weights(for: config)))
            #expect(try tokenizer.identity == vocabulary.identity && tokenizer.identity == catalog.tokenizer(for: config).identity)
        }
        var named = try self.catalog.config(named: "tiny")   // names tokenizer.bin
        try FileManager.default.copyItem(at: self.catalog.resolve("tokenizer.bin"), to: directory.appendingPathComponent("tokenizer.bin"))
        try Fixtures.tinyWeights(named).ggufData(tokenizer: vocabulary).write(to: directory.appendingPathComponent("named.gguf"))
        named.weights = .gguf(path: "named.gguf")
        #expect(try catalog.model(for: named).tokenizer.identity == Fixtures.bundledTokenizer.identity)
    }

    @Test func configCodable_roundTripsAndDefaultsOptionalFields() throws {
        let config = try catalog.config(named: "small")
        let data = try JSONEncoder().encode(config)
        #expect(try JSONDecoder().decode(ModelConfig.self, from: data) == config)
        let minimal = #"{"name":"m","dim":32,"hiddenDim":64,"layerCount":1,"headCount":4,"kvHeadCount":2,"vocabSize":300,"contextLength":16,"weights":{"checkpoint":{"path":"m.bin"}}}"#
        let decoded = try JSONDecoder().decode(ModelConfig.self, from: Data(minimal.utf8))
        #expect(decoded.normEpsilon == 1e-5 && decoded.ropeTheta == 10000 && decoded.sharedClassifier)
        #expect(decoded.weights == .checkpoint(path: "m.bin") && decoded.kvDim == 16 && decoded.headDim == 8)
    }
}
