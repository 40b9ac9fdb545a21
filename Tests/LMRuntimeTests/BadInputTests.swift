import Foundation
import LMRuntime
import LMTestSupport
import Testing

/// Every kind of bad input gets a typed error naming the problem, and nothing already held changes.
struct BadInputTests {
    static func header(_ values: [Int32]) -> Data {
        var data = Data()
        for v in values { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        return data
    }

    func loadCheckpoint(_ data: Data, _ name: String) throws -> ModelWeights {
        let url = Fixtures.temporaryFile(name)
        try data.write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        return try ModelWeights.checkpoint(at: url)
    }

    func loadTokenizer(_ data: Data, vocabSize: Int? = nil) throws -> Tokenizer {
        try Tokenizer(serialized: data, vocabSize: vocabSize, path: "t.bin")
    }

    @Test func checkpoint_truncatedFileNamesBothSizes() throws {
        let full = try Fixtures.tinyWeights().checkpointData()
        let cut = full.prefix(full.count - 10)
        #expect(throws: ModelLoadError.self) { try loadCheckpoint(cut, "cut.bin") }
        do { _ = try loadCheckpoint(cut, "cut.bin") } catch let ModelLoadError.truncated(_, expected, actual) {
            #expect(expected == full.count && actual == full.count - 10)
        }
        do {
            _ = try loadCheckpoint(Data(count: 12), "short.bin")
            Issue.record("a 12-byte checkpoint was accepted")
        } catch let ModelLoadError.truncated(_, expected, actual) {
            #expect(expected == 28 && actual == 12)
        }
    }

    @Test(arguments: [
        ([0, 172, 5, 8, 4, 512, 512], "dim is 0"),
        ([64, -1, 5, 8, 4, 512, 512], "hidden_dim is -1"),
        ([64, 172, 5, 7, 7, 512, 512], "does not divide dim"),
        ([64, 172, 5, 8, 3, 512, 512], "does not divide headCount"),
        ([64, 172, 5, 8, 4, 0, 512], "vocab_size is 0"),
        ([64, 172, 0, 8, 4, 512, 512], "n_layers is 0"),
        ([1 << 20, 1 << 20, 1 << 20, 1, 1, 1 << 20, 1024], "the limit is 2^31"),
        ([Int32.max, Int32.max, Int32.max, 1, 1, Int32.max, Int32.max], "must be even"),
        ([64, 172, 5, 8, 4, -512, Int32.max], "exceeds 1,048,576"),
    ] as [([Int32], String)])
    func checkpoint_impossibleHeaderIsRejected(header: [Int32], reason: String) throws {
        do {
            _ = try loadCheckpoint(Self.header(header) + Data(count: 4096), "bad-header.bin")
            Issue.record("accepted an impossible header \(header)")
        } catch let ModelLoadError.invalidDimensions(message) {
            #expect(message.contains(reason), "\(message)")
        }
    }

    @Test func checkpoint_headerLargerThanFileIsTruncated() throws {
        #expect(throws: ModelLoadError.self) {
            try loadCheckpoint(Self.header([256, 512, 4, 8, 8, 1000, 256]) + Data(count: 1000), "big.bin")
        }
    }

    @Test func checkpoint_missingFileIsUnreadable() {
        #expect(throws: ModelLoadError.self) { try ModelWeights.checkpoint(at: URL(fileURLWithPath: "/nonexistent/model.bin")) }
    }

    @Test func tokenizer_corruptFilesNameTheOffset() throws {
        let good = Fixtures.bundledTokenizer.serialized()
        // Cut inside the last entry.
        #expect(throws: ModelLoadError.self) { try loadTokenizer(good.prefix(good.count - 2), vocabSize: 4096) }
        // A zero max token length.
        var zero = good
        zero.replaceSubrange(0 ..< 4, with: Self.header([0]))
        #expect(throws: ModelLoadError.corruptTokenizer(path: "t.bin", byteOffset: 0, reason: "max token length 0 is not in 1...65536")) {
            try loadTokenizer(zero)
        }
        // The first entry's length (bytes 8..<12) made negative.
        var negative = good
        negative.replaceSubrange(8 ..< 12, with: Self.header([-5]))
        #expect(throws: ModelLoadError.corruptTokenizer(path: "t.bin", byteOffset: 8,
                                                         reason: "entry 0 has length -5, outside 0...\(Fixtures.bundledTokenizer.maxTokenLength)")) {
            try loadTokenizer(negative)
        }
        // Too few entries for the byte-fallback layout.
        #expect(throws: ModelLoadError.self) { try loadTokenizer(good.prefix(200)) }
        #expect(throws: ModelLoadError.self) { try loadTokenizer(Data()) }
    }

    @Test func tokenizer_vocabularyMismatchWithModelIsReported() throws {
        let dir = Fixtures.temporaryFile("catalog-mismatch")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Fixtures.bundledTokenizer.serialized().write(to: dir.appendingPathComponent("tokenizer.bin"))
        var config = Fixtures.tinyConfig(vocabSize: 300)
        config.tokenizer = "tokenizer.bin"
        #expect(throws: ModelLoadError.vocabularyMismatch(modelVocabSize: 300, tokenizerVocabSize: 4096)) {
            try ModelCatalog(directory: dir).tokenizer(for: config)
        }
    }

    @Test(arguments: [
        ("{ not json", "not valid JSON"),
        (#"{"name":"x","dim":64}"#, "missing field"),
        (#"{"name":"x","dim":"wide","hiddenDim":1,"layerCount":1,"headCount":1,"kvHeadCount":1,"vocabSize":300,"contextLength":8,"weights":{"synthetic":{"seed":1}}}"#, "wrong type"),
        (#"{"name":"x","dim":64,"hiddenDim":128,"layerCount":2,"headCount":5,"kvHeadCount":1,"vocabSize":300,"contextLength":8,"weights":{"synthetic":{"seed":1}}}"#, "does not divide dim"),
        (#"{"name":"x","dim":64,"hiddenDim":128,"layerCount":2,"headCount":4,"kvHeadCount":4,"vocabSize":300,"contextLength":-8,"weights":{"synthetic":{"seed":1}}}"#, "contextLength must be positive"),
    ])
    func config_invalidJSONIsRejectedWithReason(json: String, reason: String) throws {
        let url = Fixtures.temporaryFile("config-\(abs(json.hashValue)).json")
        try Data(json.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            _ = try ModelCatalog.config(at: url)
            Issue.record("accepted \(json)")
        } catch let ModelLoadError.invalidConfig(_, message) {
            #expect(message.contains(reason), "\(message)")
        }
    }

    @Test func catalog_unknownModelListsTheAvailableOnes() {
        #expect(throws: ModelLoadError.unknownModel(name: "huge", available: ["base", "small", "tiny"])) {
            try Fixtures.bundledCatalog.config(named: "huge")
        }
    }

    @Test func forward_tokenOutsideVocabularyThrowsAndLeavesCacheUnchanged() throws {
        let model = Transformer(weights: Fixtures.tinyWeights())
        let cache = model.makeCache()
        try model.forward([1, 2, 3], cache: cache)
        let rows = cache.snapshotRows(0 ..< 3)
        for bad in [-1, model.config.vocabSize, Int.max] {
            #expect(throws: RuntimeError.tokenOutOfVocabulary(token: bad, index: 1, vocabSize: model.config.vocabSize)) {
                try model.forward([4, bad, 5], cache: cache)
            }
        }
        #expect(cache.tokens == [1, 2, 3] && cache.snapshotRows(0 ..< 3) == rows)
        try model.forward([4], cache: cache)   // still usable
        #expect(try cache.deviationFromFreshPrefill(model).maxRelativeError <= 1e-4)
    }

    @Test func forward_beyondContextThrowsWithCountsAndLeavesCacheUnchanged() throws {
        let model = Transformer(weights: Fixtures.tinyWeights())
        let cache = model.makeCache()
        let context = model.config.contextLength
        try model.forward(Array(repeating: 5, count: context - 2), cache: cache)
        #expect(throws: RuntimeError.contextOverflow(cachedTokens: context - 2, newTokens: 3, capacity: context)) {
            try model.forward([1, 2, 3], cache: cache)
        }
        #expect(cache.count == context - 2)
        try model.forward([1, 2], cache: cache)
        #expect(cache.count == context)
        let small = model.makeCache(capacity: 4)
        #expect(throws: RuntimeError.contextOverflow(cachedTokens: 0, newTokens: 5, capacity: 4)) {
            try model.forward([1, 2, 3, 4, 5], cache: small)
        }
    }

    @Test func forward_emptyInputAndMismatchedCacheThrow() throws {
        let model = Transformer(weights: Fixtures.tinyWeights())
        #expect(throws: RuntimeError.emptyInput) { try model.forward([], cache: model.makeCache()) }
        let other = Transformer(weights: Fixtures.tinyWeights(Fixtures.tinyConfig(layerCount: 3)))
        #expect(throws: RuntimeError.cacheShapeMismatch(expectedLayers: 2, expectedKVDim: 16, layers: 3, kvDim: 16)) {
            try model.forward([1], cache: other.makeCache())
        }
    }

    @Test func sampler_invalidParametersAreRejected() {
        #expect(throws: SamplerError.self) { try Sampler(.temperature(-1)) }
        #expect(throws: SamplerError.self) { try Sampler(.temperature(.nan)) }
        #expect(throws: SamplerError.self) { try Sampler(.topK(0, temperature: 1)) }
        #expect(throws: SamplerError.self) { try Sampler(.topP(0, temperature: 1)) }
        #expect(throws: SamplerError.self) { try Sampler(.topP(1.5, temperature: 1)) }
    }

    @Test func errors_describeTheProblemInWords() {
        let samples: [any CustomStringConvertible] = [
            ModelLoadError.truncated(path: "m.bin", expectedBytes: 100, actualBytes: 10),
            RuntimeError.contextOverflow(cachedTokens: 10, newTokens: 5, capacity: 12),
            RuntimeError.tokenOutOfVocabulary(token: 999, index: 2, vocabSize: 512),
        ]
        #expect(samples[0].description.contains("100") && samples[0].description.contains("10"))
        #expect(samples[1].description.contains("12"))
        #expect(samples[2].description.contains("999") && samples[2].description.contains("512"))
    }
}
