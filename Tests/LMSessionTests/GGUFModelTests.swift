import Foundation
@testable import LMRuntime
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

    /// A catalog config naming a GGUF file and keeping it in halfs is read the same way: straight
    /// into halfs (the bits of converting), its float32 fingerprint read again when asked for.
    @Test func catalogModel_aGGUFConfigInHalfsReadsThemStraightAndFingerprintsTheFloatWeights() throws {
        let directory = Fixtures.temporaryFile("catalog-halfs")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let loaded = try tinyModel.loaded()
        let file = directory.appendingPathComponent("m.gguf")
        try loaded.weights.ggufData(tokenizer: loaded.tokenizer).write(to: file)
        var config = loaded.weights.config
        (config.name, config.weights, config.tokenizer, config.weightPrecision) = ("m", .gguf(path: "m.gguf"), nil, .f16)
        try JSONEncoder().encode(config).write(to: directory.appendingPathComponent("m.json"))
        let catalog = ModelCatalog(directory: directory)
        let halfs = SystemLanguageModel(named: "m", in: catalog, prefixStore: .memoryOnly(memoryByteLimit: 0))
        let read = try ModelWeights.gguf(at: file)
        #expect(try halfs.loaded().weights.precision == .f16)
        #expect(try ModelFingerprint(halfs.loaded().weights) == ModelFingerprint(read.converted(to: .f16)))
        #expect(try halfs.baseFingerprint() == ModelFingerprint(read))
        #expect(try halfs.loaded().tokenizer.identity == loaded.tokenizer.identity)
        let floats = SystemLanguageModel(named: "m", in: catalog, weightPrecision: .f32, prefixStore: .memoryOnly(memoryByteLimit: 0))
        #expect(try floats.loaded().weights.precision == .f32 && floats.baseFingerprint() == ModelFingerprint(read))
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
        // All of it reused, with ChatML's close (`<|im_end|>` and its newline) run at the turn's end.
        #expect(second.usage.input.cachedTokenCount == firstTurn + PromptRenderer(tokenizer: tokenizer).close.count)
        // Guided generation masks with this vocabulary's bytes: the value parses, whatever the weights.
        let ticket = try await LanguageModelSession(model: model).respond(to: "File a ticket.", generating: Ticket.self,
                                                                         options: short(120)).content
        #expect(["low", "high"].contains(ticket.priority))
    }

    /// The pieces of rendered tokens, control tokens spelled out.
    static func spelled(_ tokens: [Int], _ tokenizer: Tokenizer) -> String {
        tokens.map { String(decoding: tokenizer.pieces[$0], as: UTF8.self) }.joined()
    }

    @Test func render_usesTheVocabularysChatTemplate() throws {
        let directory = Fixtures.packageRoot.appendingPathComponent("Tests/Fixtures/byte-level-bpe")
        let chatML = try Tokenizer(ggufAt: directory.appendingPathComponent("qwen2.gguf"))
        let history: [Transcript.Entry] = [.prompt(.init(text: "Hi")), .response(.init(text: "Hello.", tokenIDs: chatML.encode("Hello.", bos: false)))]
        let rendered = PromptRenderer(tokenizer: chatML).render([.text("Be brief.")], history: history, prompt: .init(text: "Go on."))
        // No BOS in a Qwen2 vocabulary; ChatML's turns, with the newline between them.
        #expect(Self.spelled(rendered.tokens, chatML) == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            + "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nGo on.<|im_end|>\n<|im_start|>assistant\n")
        #expect(PromptRenderer(tokenizer: chatML).end == chatML.id(of: "<|im_end|>"))

        // Llama 3's headers, in a copy of the vocabulary whose chat tokens are Llama 3's, with BOS.
        let llama3 = try llama3Vocabulary()
        let headers = PromptRenderer(tokenizer: llama3).render([.text("Be brief.")], history: [], prompt: .init(text: "Hi"))
        #expect(Self.spelled(headers.tokens, llama3) == "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            + "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
        #expect(PromptRenderer(tokenizer: llama3).end == llama3.id(of: "<|eot_id|>"))

        // Without control tokens of a template: plain-text markers and EOS.
        let plain = try Tokenizer(gguf: GGUFFile(data: {
            var w = GGUFWriter()
            for (key, value) in chatML.ggufMetadata() {
                w.set(key, key == "tokenizer.ggml.token_type" ? .array(chatML.byteLevel!.tokenTypes.map { _ in GGUFValue.int32(1) }) : value)
            }
            return w.data()
        }()))
        let text = PromptRenderer(tokenizer: plain).render([.text("Be brief.")], history: [], prompt: .init(text: "Hi"))
        #expect(Self.spelled(text.tokens, plain) == "System:Be brief.<|im_end|>User:Hi<|im_end|>Assistant:")
    }

    @Test func ggufModel_withALimitedContextSharesCachedKVWithTheWholeModel() async throws {
        let loaded = try tinyModel.loaded()   // declares 1,024 positions
        let url = Fixtures.temporaryFile("tiny-limited.gguf"), directory = Fixtures.temporaryFile("kv-limited")
        defer { for file in [url, directory] { try? FileManager.default.removeItem(at: file) } }
        try loaded.weights.ggufData(tokenizer: loaded.tokenizer).write(to: url)
        let limited = SystemLanguageModel(gguf: url, contextLength: 256, prefixStore: .persistent(in: directory))
        #expect(limited.contextSize == 256)
        let original = LanguageModelSession(model: limited, instructions: "You are a running coach.")
        for prompt in ["Plan a tempo run.", "And tomorrow?"] { _ = try await original.respond(to: prompt, options: short(8)) }
        let held = try await original.cachedTokens
        try limited.loaded().prefixStore.flush()

        // Past the limit: the typed error with the limited size, and the conversation kept.
        let transcript = original.transcript
        do {
            _ = try await original.respond(to: String(repeating: "run fast and far ", count: 60), options: short(8))
            Issue.record("a prompt past the limited context was answered")
        } catch let LanguageModelError.contextSizeExceeded(context) {
            #expect(context.contextSize == 256)
        }
        #expect(original.transcript == transcript)

        // The whole model (a relaunch without the limit) restores every row from the same directory.
        let whole = SystemLanguageModel(gguf: url, prefixStore: .persistent(in: directory))
        #expect(whole.contextSize == 1024)
        let session = LanguageModelSession(model: whole, transcript: transcript)
        let r = try await session.respond(to: "How fast?", options: short(8))
        #expect(r.usage.input.cachedFromDiskCount == held.count)
        try await session.expectCacheExact()
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
