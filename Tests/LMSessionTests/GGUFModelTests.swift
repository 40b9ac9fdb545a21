import Foundation
import LMRuntime
@testable import LMSession
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

    @Test func ggufModel_withAByteLevelVocabularyAnswersReusesAndGuides() async throws {
        let vocabulary = Fixtures.packageRoot.appendingPathComponent("Tests/Fixtures/byte-level-bpe/qwen2.gguf")
        let tokenizer = try Tokenizer(ggufAt: vocabulary)
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: tokenizer.vocabSize, contextLength: 512))
        let url = Fixtures.temporaryFile("byte-level.gguf")
        defer { try? FileManager.default.removeItem(at: url) }
        try weights.ggufData(tokenizer: tokenizer).write(to: url)
        let model = SystemLanguageModel(gguf: url, prefixStore: .memoryOnly(memoryByteLimit: 0))
        #expect(try model.loaded().tokenizer.identity == tokenizer.identity)

        let session = LanguageModelSession(model: model, instructions: "You are a running coach.")
        let first = try await session.respond(to: "Plan a tempo run.", options: short(8))
        let second = try await session.respond(to: "And tomorrow?", options: short(8))
        #expect(first.usage.input.cachedTokenCount == 0)
        // The first turn's tokens are the start of the second's: instructions, prompt, answer.
        let firstTurn = first.usage.input.totalTokenCount + first.usage.output.totalTokenCount
        #expect(second.usage.input.cachedTokenCount >= firstTurn - 1)
        // No BOS in a Qwen2 vocabulary: the prompt starts with the instructions' marker text.
        let rendered = PromptRenderer(tokenizer: tokenizer).render([.text("x")], history: [], prompt: nil, header: false).tokens
        #expect(rendered.first != tokenizer.bosToken && rendered.starts(with: tokenizer.encode("System:", bos: false)))
        // Guided generation masks with this vocabulary's bytes: the value parses, whatever the weights.
        let ticket = try await LanguageModelSession(model: model).respond(to: "File a ticket.", generating: Ticket.self,
                                                                         options: short(120)).content
        #expect(["low", "high"].contains(ticket.priority))
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
