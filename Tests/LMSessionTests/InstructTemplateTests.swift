import Foundation
@testable import LMRuntime
@testable import LMSession
import LMTestSupport
import Testing

/// Turn layouts read from the chat template of a SentencePiece vocabulary without chat tokens:
/// `[INST]` (Llama 2 chat, Mistral Instruct) and Zephyr (TinyLlama chat); and Mistral v3's
/// `[INST]` control tokens.
struct InstructTemplateTests {
    /// A Llama 2 style template: BOS before every `[INST]`, the system message between `<<SYS>>`
    /// and `<</SYS>>` inside the first one.
    static let llama2 = """
        {% for message in messages %}{% if message['role'] == 'system' %}{% set system = '<<SYS>>\\n' + message['content'] + '\\n<</SYS>>\\n\\n' %}\
        {% elif message['role'] == 'user' %}{{ bos_token + '[INST] ' + system + message['content'] + ' [/INST]' }}{% set system = '' %}\
        {% else %}{{ ' ' + message['content'] + ' ' + eos_token }}{% endif %}{% endfor %}
        """
    /// A Mistral Instruct style template: one BOS, no system markers.
    static let mistral = """
        {{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}\
        {% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}
        """
    /// A Zephyr style template, as TinyLlama chat's.
    static let zephyr = """
        {% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}\
        {% elif message['role'] == 'system' %}{{ '<|system|>\\n' + message['content'] + eos_token }}\
        {% else %}{{ '<|assistant|>\\n' + message['content'] + eos_token }}{% endif %}\
        {% if loop.last and add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}{% endfor %}
        """

    /// Stands for the Mistral v3 layout fixture (`[INST]` and `[/INST]` control tokens) and its own template.
    static let mistralV3 = "the Mistral v3 layout fixture"

    /// The bundled vocabulary without its chat control pieces (renamed to pieces no text spells),
    /// as a Llama 2 vocabulary has none, with `template`; or the ``mistralV3`` fixture.
    static func vocabulary(_ template: String?) -> Tokenizer {
        if template == mistralV3 { return try! Tokenizer(ggufAt: Fixtures.mistralV3Vocabulary) }
        let bundled = Fixtures.bundledTokenizer
        let renamed = Set(ControlPieces.all.compactMap(bundled.id(of:)))
        let pieces = bundled.pieces.enumerated().map { id, piece in renamed.contains(id) ? Array("\u{1}unused\(id)\u{1}".utf8) : piece }
        var vocabulary = Tokenizer(pieces: pieces, scores: bundled.scores)
        vocabulary.chatTemplate = template
        return vocabulary
    }

    static func model(_ template: String) -> SystemLanguageModel {
        let vocabulary = vocabulary(template)
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: vocabulary.vocabSize, contextLength: 1024))
        return SystemLanguageModel(try! LoadedModel(weights: weights, tokenizer: vocabulary, prefixStore: .memoryOnly(memoryByteLimit: 0)))
    }

    /// The tokens as text, each with its own bytes (a dummy-prefix space included), BOS and EOS
    /// spelled `<s>` and `</s>`.
    static func spelled(_ tokens: [Int], _ vocabulary: Tokenizer) -> String {
        var bytes: [UInt8] = []
        for token in tokens {
            switch token {
            case vocabulary.bosToken: bytes += Array("<s>".utf8)
            case vocabulary.eosToken: bytes += Array("</s>".utf8)
            default: bytes += vocabulary.bytes(of: token, after: nil)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A request's tokens as text: `instructions`, a history of one exchange ("Hi", "Hello"), then "Next".
    static func rendered(_ template: String, instructions: [String], history: [Transcript.Entry]? = nil) -> String {
        let vocabulary = vocabulary(template)
        let renderer = PromptRenderer(tokenizer: vocabulary)
        let out = renderer.render(instructions.map(InstructionComponent.text), history: history ?? exchange, prompt: .init(text: "Next"))
        return spelled(out.tokens, vocabulary)
    }

    static let exchange: [Transcript.Entry] = [.prompt(.init(text: "Hi")), .response(.init(text: "Hello", tokenIDs: []))]

    @Test func render_llama2PutsTheSystemMessageInTheFirstTurnAndBOSBeforeEach() {
        #expect(Self.rendered(Self.llama2, instructions: ["Be brief."])
            == "<s> [INST] <<SYS>>\n Be brief.\n<</SYS>>\n\n Hi [/INST] Hello</s><s> [INST] Next [/INST]")
        #expect(Self.rendered(Self.llama2, instructions: []) == "<s> [INST] Hi [/INST] Hello</s><s> [INST] Next [/INST]")
        // A history that opens with an answer closes the system message's turn first.
        let answer: [Transcript.Entry] = [.response(.init(text: "Hello", tokenIDs: []))]
        #expect(Self.rendered(Self.llama2, instructions: ["Be brief."], history: answer)
            == "<s> [INST] <<SYS>>\n Be brief.\n<</SYS>>\n\n [/INST] Hello</s><s> [INST] Next [/INST]")
        #expect(Self.rendered(Self.llama2, instructions: [], history: answer) == "<s> Hello</s><s> [INST] Next [/INST]")
    }

    @Test func render_mistralRunsTheSystemMessageIntoTheFirstTurnWithOneBOS() {
        #expect(Self.rendered(Self.mistral, instructions: ["Be brief."]) == "<s> [INST] Be brief.\n\n Hi [/INST] Hello</s> [INST] Next [/INST]")
        #expect(Self.rendered(Self.mistral, instructions: []) == "<s> [INST] Hi [/INST] Hello</s> [INST] Next [/INST]")
        #expect(Self.rendered(Self.mistral, instructions: ["Be brief.", "Use metric units."])
            == "<s> [INST] Be brief. Use metric units.\n\n Hi [/INST] Hello</s> [INST] Next [/INST]")
    }

    @Test func render_mistralV3MarksTurnsWithItsControlTokens() {
        #expect(Self.rendered(Self.mistralV3, instructions: ["Be brief."]) == "<s>[INST] Be brief.\n\n Hi[/INST] Hello</s>[INST] Next[/INST]")
        let vocabulary = Self.vocabulary(Self.mistralV3)
        let renderer = PromptRenderer(tokenizer: vocabulary)
        #expect(renderer.user == [vocabulary.id(of: "[INST]")!] && renderer.userClose == [vocabulary.id(of: "[/INST]")!])
        // The control tokens mark turns whatever the template says.
        var untemplated = vocabulary
        untemplated.chatTemplate = nil
        #expect(PromptRenderer(tokenizer: untemplated).user == renderer.user)
    }

    @Test func render_zephyrWritesItsRolesAsText() {
        #expect(Self.rendered(Self.zephyr, instructions: ["Be brief."])
            == "<s> <|system|>\n Be brief.</s> \n<|user|>\n Hi</s> \n<|assistant|>\n Hello</s> \n<|user|>\n Next</s> \n<|assistant|>\n")
        // Without a template, or with one of neither kind, the markers stay plain text.
        for template in [nil, "{{ messages }}"] {
            let renderer = PromptRenderer(tokenizer: Self.vocabulary(template))
            #expect(Self.spelled(renderer.user, renderer.tokenizer) == " User:")
            #expect(renderer.systemCarry == nil)
        }
    }

    @Test func encodeContinuing_writesNoDummyPrefix() {
        let vocabulary = Self.vocabulary(nil)
        for text in ["\n<</SYS>>\n\n", "Hello there", "émoji 🙂"] {
            let ids = vocabulary.encode(continuing: text)
            #expect(vocabulary.decode(ids) == text)
            #expect(Self.spelled(vocabulary.encode(text, bos: false), vocabulary) == " " + text)
            #expect(Self.spelled(ids, vocabulary) == text)
        }
        #expect(vocabulary.encode(continuing: "") == [])
        // A byte-level vocabulary writes no dummy prefix anyway.
        let byteLevel = try! Tokenizer(ggufAt: Fixtures.toolTagsVocabulary)
        #expect(byteLevel.encode(continuing: "Hello there") == byteLevel.encode("Hello there", bos: false))
    }

    @Test(arguments: [llama2, mistral, zephyr, mistralV3])
    func respond_turnsInATemplatesFormatReuseTheWholeCache(template: String) async throws {
        let model = Self.model(template)
        let session = LanguageModelSession(model: model, instructions: "Answer briefly.")
        let first = try await session.respond(to: "Name a colour.", options: short(5))
        try await session.expectCacheExact()
        let held = try await session.cachedTokens
        let second = try await session.respond(to: "And another?", options: short(5))
        // The whole first turn, closed as the second request renders it, is reused.
        #expect(second.usage.input.cachedTokenCount == held.count)
        #expect(Array(try await session.cachedTokens.prefix(held.count)) == held)
        try await session.expectCacheExact()
        #expect(first.usage.input.cachedTokenCount == 0)

        // Prewarming a prompt's start leaves the open turn as the request renders it: all it
        // computed is a prefix of the request, and reused.
        let renderer = PromptRenderer(tokenizer: Self.vocabulary(template))
        var warm = renderer.render([.text("Answer briefly.")], history: [], prompt: nil, header: false)
        renderer.renderPromptPrefix("Name a", into: &warm)
        let request = renderer.render([.text("Answer briefly.")], history: [], prompt: .init(text: "Name a colour."))
        #expect(request.tokens.starts(with: warm.tokens))
        let prewarmed = LanguageModelSession(model: model, instructions: "Answer briefly.")
        prewarmed.prewarm(promptPrefix: "Name a")
        let third = try await prewarmed.respond(to: "Name a colour.", options: short(5))
        #expect(third.usage.input.cachedTokenCount == warm.tokens.count)
        try await prewarmed.expectCacheExact()

        // A guided request's schema is a turn of its own after the prompt; the answer is valid.
        let guided = try await session.respond(to: "A trip?", generating: TripIdea.self, options: GenerationOptions(maximumResponseTokens: 400))
        #expect((2 ... 4).contains(guided.content.stops.count))
        try await session.expectCacheExact()
    }

    @Test func tokenCount_ofAPromptIsWhatARequestRendersForIt() async throws {
        for (model, vocabulary) in [(Self.model(Self.llama2), Self.vocabulary(Self.llama2)), (Self.model(Self.zephyr), Self.vocabulary(Self.zephyr)),
                                    (ChatTemplateTests.model, ChatTemplateTests.vocabulary)] {
            let out = PromptRenderer(tokenizer: vocabulary).render([.text("Be brief.")], history: Self.exchange, prompt: .init(text: "Name a colour."))
            let prompt = try #require(out.spans.first { $0.segment == .prompt })
            #expect(try await model.tokenCount(for: Prompt("Name a colour.")) == prompt.range.count)
        }
    }
}
