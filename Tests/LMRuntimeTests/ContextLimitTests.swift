import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// A model loaded with less context than its file declares (`ModelConfig.limitingContext(to:)`,
/// `ModelWeights.gguf(at:precision:contextLength:memoryLimit:)`): the same model in less memory.
struct ContextLimitTests {
    /// A tiny model declaring a long context, as Llama 3.x files do.
    static let long = Fixtures.tinyConfig(contextLength: 65_536)

    @Test func limitingContext_onlyShortensAndKeepsTheDeclaredLength() throws {
        let limited = Self.long.limitingContext(to: 128)
        #expect(limited.contextLength == 128 && limited.trainedContextLength == 65_536)
        #expect(limited.declared == Self.long)
        try limited.validate()
        // Limiting again keeps the model's own length; a limit at or above the context changes nothing.
        let again = limited.limitingContext(to: 64)
        #expect(again.contextLength == 64 && again.trainedContextLength == 65_536)
        #expect(limited.limitingContext(to: 128) == limited && limited.limitingContext(to: 4096) == limited)
        #expect(Self.long.limitingContext(to: 65_536) == Self.long && Self.long.trainedContextLength == nil)
        // A limit below one position is impossible dimensions, named.
        #expect(throws: ModelLoadError.invalidDimensions("contextLength must be positive, got 0")) {
            try Self.long.limitingContext(to: 0).validate()
        }
    }

    @Test func json_writesTheTrainedLengthOnlyWhenLimitedAndValidatesIt() throws {
        let limited = Self.long.limitingContext(to: 128)
        let json = try JSONEncoder().encode(limited)
        #expect(try JSONDecoder().decode(ModelConfig.self, from: json) == limited)
        #expect(try !String(decoding: JSONEncoder().encode(Self.long), as: UTF8.self).contains("trainedContextLength"))
        var impossible = limited
        impossible.trainedContextLength = 128   // not longer than the context it was limited to
        #expect(throws: ModelLoadError.self) { try impossible.validate() }
        impossible.trainedContextLength = Int(UInt32.max) + 1   // a GGUF header could not record it
        #expect(throws: ModelLoadError.self) { try impossible.validate() }
    }

    @Test func gguf_withAContextLengthLoadsTheSameModelInLessMemory() throws {
        let whole = Fixtures.tinyWeights(Self.long)
        let file = try whole.ggufData()
        let limitedEstimate = Self.long.limitingContext(to: 128).resourceEstimate().totalBytes
        let limit = (limitedEstimate + Self.long.resourceEstimate().totalBytes) / 2
        #expect(throws: ModelLoadError.self) { try ModelWeights.gguf(data: file, memoryLimit: limit) }

        let limited = try ModelWeights.gguf(data: file, contextLength: 128, memoryLimit: limit)
        #expect(limited.config.contextLength == 128 && limited.config.trainedContextLength == 65_536)
        #expect(limited.ropeCos.rows == 128)
        for position in [0, 1, 77, 127] {
            for i in 0 ..< limited.config.headDim / 2 {
                #expect(limited.ropeCos[position, i] == whole.ropeCos[position, i])
                #expect(limited.ropeSin[position, i] == whole.ropeSin[position, i])
            }
        }
        // The same model: one fingerprint (cached K/V and adapters carry over), the same logits.
        let wholeRead = try ModelWeights.gguf(data: file)   // the file's config names the model
        #expect(ModelFingerprint(limited) == ModelFingerprint(wholeRead))
        let tokens = Fixtures.tokens(count: 100, vocabSize: 300, seed: 3)
        let a = Transformer(weights: whole), b = Transformer(weights: limited)
        let cacheA = a.makeCache(), cacheB = b.makeCache()
        #expect(try a.forward(Array(tokens[..<60]), cache: cacheA).toArray() == b.forward(Array(tokens[..<60]), cache: cacheB).toArray())
        #expect(try a.forward(Array(tokens[60...]), cache: cacheA).toArray() == b.forward(Array(tokens[60...]), cache: cacheB).toArray())
        // Beyond the limit, a typed refusal and the cache as it was.
        let held = cacheB.snapshotRows(0 ..< 100)
        #expect(throws: RuntimeError.contextOverflow(cachedTokens: 100, newTokens: 29, capacity: 128)) {
            try b.forward(Array(repeating: 5, count: 29), cache: cacheB)
        }
        #expect(cacheB.count == 100 && cacheB.snapshotRows(0 ..< 100) == held)
    }

    @Test func writers_recordTheDeclaredLengthOrRefuse() throws {
        let limited = try ModelWeights.gguf(data: Fixtures.tinyWeights(Self.long).ggufData(), contextLength: 128)
        let reread = try ModelWeights.gguf(data: limited.ggufData())
        #expect(reread.config.contextLength == 65_536 && reread.config.trainedContextLength == nil)
        #expect(ModelFingerprint(reread) == ModelFingerprint(limited))
        // llama2.c's header has one length; writing the limited one would make another model.
        #expect(throws: ModelLoadError.self) { try limited.checkpointData() }
        #expect(throws: ModelLoadError.invalidDimensions("contextLength must be positive, got 0")) {
            try ModelWeights.gguf(data: Fixtures.tinyWeights(Self.long).ggufData(), contextLength: 0)
        }
    }

    @Test func gguf_aDeclaredContextBeyondTheRuntimesLimitLoadsWhenLimited() throws {
        // A file declaring 10M positions (written from a config limited from them).
        var config = Fixtures.tinyConfig(contextLength: 256)
        config.trainedContextLength = 10_000_000
        let weights = try ModelWeights.synthetic(config, seed: 7)
        let file = try weights.ggufData()
        #expect(throws: ModelLoadError.invalidDimensions("contextLength 10000000 exceeds 1,048,576")) {
            try ModelWeights.gguf(data: file)
        }
        let limited = try ModelWeights.gguf(data: file, contextLength: 256)
        #expect(limited.config.contextLength == 256 && limited.config.trainedContextLength == 10_000_000)
        #expect(ModelFingerprint(limited) == ModelFingerprint(try ModelWeights.gguf(data: file, contextLength: 512)))
    }

    @Test func catalog_aGGUFConfigsShorterContextLimitsTheFile() throws {
        let directory = Fixtures.temporaryFile("catalog-context")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Fixtures.tinyWeights(Self.long).ggufData().write(to: directory.appendingPathComponent("long.gguf"))
        let catalog = ModelCatalog(directory: directory)
        var config = Self.long
        config.weights = .gguf(path: "long.gguf")
        for (asked, expected) in [(200, 200), (65_536, 65_536), (100_000, 65_536)] {
            config.contextLength = asked
            let weights = try catalog.weights(for: config)
            #expect(weights.config.contextLength == expected)
            #expect(weights.config.trainedContextLength == (expected < 65_536 ? 65_536 : nil))
        }
    }
}
