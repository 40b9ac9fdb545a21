import Foundation
@testable import LMRuntime
@testable import LMSession
import LMTestSupport
import Testing

/// The system message a ChatML chat template writes when a conversation has none (Qwen2, Qwen2.5,
/// SmolLM2): read from the GGUF file's `tokenizer.chat_template`, rendered when the instructions
/// hold no text.
struct ChatTemplateTests {
    /// Qwen2.5's template, cut to the part that writes the system turn (the tools branch writes its
    /// default as a literal of its own, after the turn's opening).
    static let qwen25 = """
        {%- if tools %}
            {{- '<|im_start|>system\\n' }}
            {%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}{%- endif %}
        {%- else %}
            {%- if messages[0]['role'] == 'system' %}
                {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
            {%- else %}
                {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
            {%- endif %}
        {%- endif %}
        """
    static let qwenDefault = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

    static let cases: [(template: String, expected: String?)] = [
        (qwen25, qwenDefault),
        // SmolLM2's, on the first message when it is not a system one.
        ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
         "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
        // A default of two lines, in double quotes.
        (#"{{ "<|im_start|>system\nLine one.\nLine two.<|im_end|>\n" }}"#, "Line one.\nLine two."),
        // Only the conversation's own system message: no default.
        ("{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}", nil),
        // A message built from a variable, or holding an escaped quote, is not a literal to read.
        ("{{ '<|im_start|>system\\n' ~ default_system ~ '<|im_end|>\\n' }}", nil),
        (#"{{ '<|im_start|>system\nIt\'s me.<|im_end|>\n' }}"#, nil),
        ("", nil),
    ]

    @Test(arguments: cases.indices)
    func defaultSystemMessage_readsOnlyALiteralSystemTurn(index: Int) {
        let (template, expected) = Self.cases[index]
        #expect(PromptRenderer.defaultSystemMessage(inChatMLTemplate: template) == expected)
    }

    /// The Qwen2 fixture vocabulary with Qwen2.5's template, and a random model on it.
    static let vocabulary: Tokenizer = {
        var vocabulary = try! Tokenizer(ggufAt: Fixtures.toolTagsVocabulary)
        vocabulary.chatTemplate = qwen25
        return vocabulary
    }()
    static let model: SystemLanguageModel = {
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: vocabulary.vocabSize, contextLength: 1024))
        let url = Fixtures.temporaryFile("chat-template.gguf")
        try! weights.ggufData(tokenizer: vocabulary).write(to: url)
        return SystemLanguageModel(gguf: url, prefixStore: .memoryOnly(memoryByteLimit: 0))
    }()

    static func spelled(_ tokens: [Int]) -> String {
        tokens.map { String(decoding: vocabulary.pieces[$0], as: UTF8.self) }.joined()
    }

    @Test func render_instructionsWithoutTextGetTheTemplatesSystemMessage() {
        let renderer = PromptRenderer(tokenizer: Self.vocabulary)
        #expect(renderer.defaultInstructions == Self.qwenDefault)
        func system(_ components: [InstructionComponent]) -> String {
            var out = RenderedPrompt()
            renderer.renderInstructions(components, into: &out)
            return Self.spelled(out.tokens)
        }
        #expect(system([]) == "<|im_start|>system\n\(Self.qwenDefault)<|im_end|>\n")
        #expect(system([.tool(WeatherTool())]).hasPrefix("<|im_start|>system\n\(Self.qwenDefault)\n\nTools you may call"))
        #expect(system([.text("Be brief."), .tool(WeatherTool())]).hasPrefix("<|im_start|>system\nBe brief.\n\nTools"))
        #expect(!system([.tool(WeatherTool()), .text("Be brief.")]).contains(Self.qwenDefault))
        // Only a ChatML vocabulary reads it: a Llama 3 one with the same text has none.
        var llama3 = try! llama3Vocabulary()
        llama3.chatTemplate = Self.qwen25
        #expect(PromptRenderer(tokenizer: llama3).defaultInstructions == nil)
    }

    @Test func respond_aSessionWithoutInstructionsSeesTheSystemMessageAndARehydratedOneToo() async throws {
        let renderer = PromptRenderer(tokenizer: Self.vocabulary)
        let preamble = Self.vocabulary.sequenceStart + renderer.system + renderer.text(Self.qwenDefault) + renderer.close
        let plain = LanguageModelSession(model: Self.model)
        _ = try await plain.respond(to: "Hello.", options: short(4))
        #expect(try await plain.cachedTokens.starts(with: preamble))
        try await plain.expectCacheExact()
        let instructed = LanguageModelSession(model: Self.model, instructions: "Be brief.")
        _ = try await instructed.respond(to: "Hello.", options: short(4))
        #expect(try await !Self.spelled(instructed.cachedTokens).contains(Self.qwenDefault))
        // Rehydrated from the first session's transcript, a session renders the same tokens before its prompt.
        let resumed = LanguageModelSession(model: Self.model, transcript: plain.transcript)
        let held = try await plain.cachedTokens
        let next = try await resumed.respond(to: "And then?", options: short(4))
        #expect(next.usage.input.totalTokenCount > held.count)
        #expect(Array(try await resumed.cachedTokens.prefix(held.count)) == held)
    }
}
