import Foundation
import LMRuntime
import LMSession
import LMTestSupport
import Testing

/// `SystemLanguageModel(gguf:)`: a session on a GGUF file behaves as one on the model it holds.
struct GGUFModelTests {
    @Test func ggufModel_answersExactlyAsTheModelItWasWrittenFrom() async throws {
        let loaded = try tinyModel.loaded()
        let url = Fixtures.temporaryFile("tiny.gguf")
        defer { try? FileManager.default.removeItem(at: url) }
        try loaded.weights.ggufData(tokenizer: loaded.tokenizer).write(to: url)
        let gguf = SystemLanguageModel(gguf: url, prefixStore: .memoryOnly(memoryByteLimit: 0))
        #expect(try gguf.loaded().tokenizer.pieces == loaded.tokenizer.pieces)
        var answers: [[String]] = []
        for model in [tinyModel, gguf] {
            let session = LanguageModelSession(model: model, instructions: "You are a running coach.")
            var texts: [String] = []
            for prompt in ["Plan a tempo run.", "And tomorrow?"] {
                let response = try await session.respond(to: prompt, options: short(8))
                texts.append(response.content)
            }
            answers.append(texts)
        }
        #expect(answers[0] == answers[1])
    }

    @Test func ggufModel_inHalfsReadsThemStraightAndFingerprintsTheFloatWeights() async throws {
        let loaded = try tinyModel.loaded()
        let url = Fixtures.temporaryFile("tiny-halfs.gguf")
        defer { try? FileManager.default.removeItem(at: url) }
        try loaded.weights.ggufData(tokenizer: loaded.tokenizer).write(to: url)
        let halfs = SystemLanguageModel(gguf: url, weightPrecision: .f16, prefixStore: .memoryOnly(memoryByteLimit: 0))
        let floats = SystemLanguageModel(gguf: url, prefixStore: .memoryOnly(memoryByteLimit: 0))
        let read = try ModelWeights.gguf(at: url), converted = try read.converted(to: .f16)   // the file's config names it
        #expect(try halfs.loaded().weights.precision == .f16)
        #expect(try ModelFingerprint(halfs.loaded().weights) == ModelFingerprint(converted))   // the bits of converting
        // Adapters match the float32 weights, which the half model never held: taken when asked for, twice the same.
        #expect(try halfs.baseFingerprint() == floats.baseFingerprint())
        #expect(try halfs.baseFingerprint() == ModelFingerprint(read))
        let session = LanguageModelSession(model: halfs, instructions: "You are a running coach.")
        let response = try await session.respond(to: "Plan a tempo run.", options: short(8))
        #expect(!response.content.isEmpty)
    }

    @Test func ggufModel_aMalformedFileIsATypedLoadError() throws {
        let url = Fixtures.temporaryFile("bad.gguf")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data("GGUF\u{2}\0\0\0".utf8).write(to: url)
        #expect(throws: ModelLoadError.gguf(path: url.path, .unsupportedVersion(2))) {
            try SystemLanguageModel(gguf: url).loaded()
        }
    }
}
