import Foundation
@testable import LMRuntime
@testable import LMSession
import LMTestSupport
import Synchronization
import Testing

/// Tool calls in a ChatML vocabulary's own tags (Qwen2.5, SmolLM2): `<tool_call>{"name":…,
/// "arguments":…}</tool_call>`, the output between `<tool_response>` tags in a user turn.
struct TaggedToolCallTests {
    /// The Qwen2 fixture vocabulary (ChatML control tokens, a user-defined `<tool_call>`) with the
    /// other three tags as user-defined tokens too, as Qwen2.5's files have them
    /// (`Scripts/make-tool-tags-fixture.py`).
    static let vocabulary = try! Tokenizer(ggufAt: Fixtures.toolTagsVocabulary)

    /// A random model on that vocabulary, written to a GGUF file and opened as a session model.
    static let model: SystemLanguageModel = {
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: vocabulary.vocabSize, contextLength: 1024))
        let url = Fixtures.temporaryFile("tagged-tools.gguf")
        try! weights.ggufData(tokenizer: vocabulary).write(to: url)
        return SystemLanguageModel(gguf: url, prefixStore: .memoryOnly(memoryByteLimit: 0))
    }()

    @Test func vocabulary_hasTheTagsAsUserDefinedTokens() {
        for tag in ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"] {
            let id = Self.vocabulary.id(of: tag)
            #expect(id != nil && !Self.vocabulary.controlTokens.contains(id!))
            #expect(Self.vocabulary.encode(tag, bos: false) == [id!])   // read from text as one token
        }
    }

    /// A Llama 3 vocabulary with `<|python_tag|>` and `<|eom_id|>` (Llama 3.1 and later), and a model on it.
    static let llama3 = try! Tokenizer(ggufAt: Fixtures.pythonTagVocabulary)
    static let llama3Model: SystemLanguageModel = {
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: llama3.vocabSize, contextLength: 1024))
        return SystemLanguageModel(try! LoadedModel(weights: weights, tokenizer: llama3, prefixStore: .memoryOnly(memoryByteLimit: 0)))
    }()

    static func spelled(_ tokens: [Int], _ vocabulary: Tokenizer = vocabulary) -> String {
        tokens.map { String(decoding: vocabulary.pieces[$0], as: UTF8.self) }.joined()
    }

    @Test func render_llama3CallsAreAJSONResponseAndOutputsAnIPythonTurn() throws {
        let renderer = PromptRenderer(tokenizer: Self.llama3)
        #expect(renderer.callFormat == .leadingJSON)
        #expect(renderer.toolCall == nil && renderer.callEnd == Self.llama3.id(of: "<|eot_id|>"))
        var out = RenderedPrompt()
        renderer.renderInstructions([.tool(WeatherTool())], into: &out)
        let system = Self.spelled(out.tokens, Self.llama3)
        #expect(system.hasPrefix("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n\n\nEnvironment: ipython\n"), "\(system)")
        #expect(system.contains(#"\#n{"type": "function", "function": {"name": "weather", "description": "Current weather for a city.", "parameters": {"#))
        let call = Transcript.ToolCalls(calls: [.init(toolName: "weather", arguments: GeneratedContent(properties: ["city": "Lisbon"]))])
        var entries = RenderedPrompt()
        renderer.renderEntry(.toolCalls(call), index: 0, into: &entries)
        renderer.renderEntry(.toolOutput(.init(toolName: "weather", text: "Sunny")), index: 1, into: &entries)
        // As Llama 3.1's and 3.2's templates write a custom tool's call: no `<|python_tag|>`, the
        // end of turn after it (`<|eom_id|>` is for their built-in tools).
        #expect(Self.spelled(entries.tokens, Self.llama3) == "<|start_header_id|>assistant<|end_header_id|>\n\n"
            + #"{"name":"weather","parameters":{"city":"Lisbon"}}<|eot_id|>"# + "<|start_header_id|>ipython<|end_header_id|>\n\nSunny<|eot_id|>")
        // The fixture is the Llama 3 vocabulary the other tests make, with the two tokens; without them (Llama 3.0), no calls.
        #expect(try Self.llama3.identity == llama3Vocabulary(adding: ["<|python_tag|>", "<|eom_id|>"]).identity)
        let llama30 = PromptRenderer(tokenizer: try llama3Vocabulary())
        #expect(llama30.toolCall == nil && !llama30.callOpensWithJSON)
    }

    @Test func render_listsToolsAsJSONAndWritesCallsAndOutputsInTheTags() async throws {
        let renderer = PromptRenderer(tokenizer: Self.vocabulary)
        #expect(renderer.callFormat == .tagged)
        #expect(renderer.toolCall == Self.vocabulary.id(of: "<tool_call>") && renderer.callEnd == Self.vocabulary.id(of: "</tool_call>"))
        var out = RenderedPrompt()
        renderer.renderInstructions([.text("Be brief."), .tool(WeatherTool()), .tool(CalendarTool())], into: &out)
        let system = Self.spelled(out.tokens)
        let weather = #"{"type": "function", "function": {"name": "weather", "description": "Current weather for a city.", "parameters": "#
        #expect(system.hasPrefix("<|im_start|>system\nBe brief.\n\nTools you may call"))
        #expect(system.contains("<tool_call>{\"name\": its name"))
        #expect(system.contains("\n" + weather + "{"))
        #expect(system.hasSuffix(#"\#n{"type": "function", "function": {"name": "calendar", "description": "Lists events for a day.", "parameters": {"# + #""properties":{"day":{"type":"string"}},"required":["day"],"title":"DayQuery","type":"object","x-order":["day"]}}}<|im_end|>\#n"#),
                "\(system)")
        // The listed schema is the tool's own, as JSON: it decodes back to the same schema.
        let line = try #require(system.split(separator: "\n").first { $0.contains(#""name": "weather""#) })
        let schemaText = String(line.dropFirst(weather.count).dropLast(2))
        #expect(try JSONDecoder().decode(GenerationSchema.self, from: Data(schemaText.utf8)) == WeatherTool().parameters)
        // Each tool is its own segment: the second's line does not repeat the sentence.
        let segments = out.spans.map { Self.spelled(Array(out.tokens[$0.range])) }
        #expect(segments.count == 3 && !segments[2].contains("Tools you may call") && segments[1].contains("Tools you may call"))
        // What the model says the tools cost is what they render to (the last segment holds the close too).
        let toolTokens = out.spans[1].range.count + out.spans[2].range.count - renderer.close.count
        #expect(try await Self.model.tokenCount(for: [WeatherTool(), CalendarTool()] as [any Tool]) == toolTokens)

        let call = Transcript.ToolCalls(calls: [.init(toolName: "weather", arguments: GeneratedContent(properties: ["city": "Lisbon"]))])
        var entries = RenderedPrompt()
        renderer.renderEntry(.toolCalls(call), index: 0, into: &entries)
        renderer.renderEntry(.toolOutput(.init(toolName: "weather", text: "Sunny")), index: 1, into: &entries)
        #expect(Self.spelled(entries.tokens) == #"<|im_start|>assistant\#n<tool_call>{"name":"weather","arguments":{"city":"Lisbon"}}</tool_call><|im_end|>\#n"#
            + "<|im_start|>user\n<tool_response>\nSunny\n</tool_response><|im_end|>\n")
        // The tags are single tokens, as a model trained on them writes them.
        let callTokens = Array(entries.tokens[entries.spans[0].range])
        #expect(callTokens.filter { $0 == renderer.toolCall || $0 == renderer.callEnd }.count == 2)
    }

    /// Runs a steered call to the weather tool (`call`'s ids, then the answer "It is sunny."),
    /// checks the round is recorded as generated and the cache exact, then a next turn. Returns
    /// that turn's response and what the cache held before it.
    func weatherRound(_ model: SystemLanguageModel, _ vocabulary: Tokenizer, call: [Int]) async throws
        -> (next: LanguageModelSession.Response<String>, held: [Int]) {
        let tool = WeatherTool()
        let session = LanguageModelSession(model: model, tools: [tool], instructions: "Answer about the weather.")
        let renderer = PromptRenderer(tokenizer: vocabulary)
        session.steer(call: call, then: vocabulary.encode("It is sunny.", bos: false) + [renderer.end])
        let response = try await session.respond(to: "Weather in Lisbon?", options: short(60))
        #expect(tool.calls.value.withLock { $0 } == 1)
        #expect(response.content == "It is sunny.")
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "toolCalls", "toolOutput", "response"])
        #expect(response.transcriptEntries.dropFirst().first == .toolCalls(.init(
            calls: [.init(toolName: "weather", arguments: GeneratedContent(properties: ["city": "Lisbon"]))], tokenIDs: call,
            assetIDs: [renderer.assetID])))
        try await session.expectCacheExact()
        let held = try await session.cachedTokens
        session.setTokenSteering(nil)
        let next = try await session.respond(to: "Thanks!", options: short())
        try await session.expectCacheExact()
        return (next, held)
    }

    @Test func toolCalling_aTaggedCallRunsTheToolAndTheNextTurnReusesTheRound() async throws {
        let renderer = PromptRenderer(tokenizer: Self.vocabulary)
        let call = [renderer.toolCall!] + Self.vocabulary.encode(#"{"name":"weather","arguments":{"city":"Lisbon"}}"#, bos: false)
            + [renderer.callEnd]
        let (next, held) = try await weatherRound(Self.model, Self.vocabulary, call: call)
        // The turn closed with `<|im_end|>` and ChatML's newline: the next turn computes only its prompt.
        #expect(next.invalidation == nil)
        #expect(next.usage.input.cachedTokenCount == held.count && held.suffix(2) == renderer.close[...])
        let prompt = renderer.user.count + Self.vocabulary.encode("Thanks!", bos: false).count + renderer.close.count + renderer.assistant.count
        #expect(next.usage.input.totalTokenCount - next.usage.input.cachedTokenCount == prompt)
    }

    /// Llama 3's `<|eom_id|>` outside a call ends the response like `<|eot_id|>` (llama.cpp stops
    /// on both): it is not in the text, the turn closes with `<|eot_id|>`, and the next turn reuses it.
    @Test func respond_llama3EndOfMessageOutsideACallEndsTheResponse() async throws {
        let session = LanguageModelSession(model: Self.llama3Model, instructions: "Answer briefly.")
        let renderer = PromptRenderer(tokenizer: Self.llama3)
        let answer = Self.llama3.encode("It is sunny.", bos: false)
        session.setTokenSteering { generated in generated.count <= answer.count ? (answer + [renderer.callEnd])[generated.count] : nil }
        let response = try await session.respond(to: "Weather?", options: short(40))
        #expect(response.content == "It is sunny." && response.usage.output.totalTokenCount == answer.count)
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "response"])
        try await session.expectCacheExact()
        let held = try await session.cachedTokens
        #expect(held.suffix(answer.count + 1) == (answer + renderer.close)[...])
        session.setTokenSteering(nil)
        let next = try await session.respond(to: "Thanks!", options: short())
        #expect(next.invalidation == nil && next.usage.input.cachedTokenCount == held.count)
        try await session.expectCacheExact()
    }

    /// A Llama 3.1 or 3.2 model calls a custom tool by answering with its JSON object: a response
    /// whose first token opens one is a call, under the call grammar, closed by `<|eot_id|>`; the
    /// tool runs, and the next turn reuses the whole round.
    @Test func toolCalling_aLlama3ResponseThatOpensAJSONObjectIsACall() async throws {
        let renderer = PromptRenderer(tokenizer: Self.llama3)
        let call = Self.llama3.encode(#"{"name":"weather","parameters":{"city":"Lisbon"}}"#, bos: false) + [renderer.callEnd]
        #expect(renderer.opensJSONObject(call[0]))
        let (next, held) = try await weatherRound(Self.llama3Model, Self.llama3, call: call)
        #expect(next.invalidation == nil && next.usage.input.cachedTokenCount == held.count)
    }

    /// With tools offered, a Llama 3 response that starts otherwise is text, and one that starts a
    /// JSON object beside a structured response format is the value, not a call.
    @Test func toolCalling_aLlama3ResponseStartingOtherwiseOrAValueIsNoCall() async throws {
        let tool = WeatherTool()
        let session = LanguageModelSession(model: Self.llama3Model, tools: [tool], instructions: "Answer about the weather.")
        let renderer = PromptRenderer(tokenizer: Self.llama3)
        let answer = Self.llama3.encode(#"Sunny. {"name":"weather"}"#, bos: false) + [renderer.end]
        session.setTokenSteering { generated in generated.count < answer.count ? answer[generated.count] : nil }
        let text = try await session.respond(to: "Weather?", options: short(40))
        #expect(text.content == #"Sunny. {"name":"weather"}"# && text.transcriptEntries.map(\.kind) == ["prompt", "response"])
        let value = Self.llama3.encode(#"{"day":"Monday"}"#, bos: false) + [renderer.end]
        session.setTokenSteering { generated in generated.count < value.count ? value[generated.count] : nil }
        let day = try await session.respond(to: "Which day?", generating: DayQuery.self, options: short(40))
        #expect(day.content.day == "Monday" && day.transcriptEntries.map(\.kind) == ["prompt", "response"])
        #expect(tool.calls.value.withLock { $0 } == 0)
        try await session.expectCacheExact()
    }

    /// The Mistral v3 layout fixture (`[INST]`, `[TOOL_CALLS]`, `[AVAILABLE_TOOLS]`, `[TOOL_RESULTS]`
    /// and their closes as control tokens), and a model on it.
    static let mistral = try! Tokenizer(ggufAt: Fixtures.mistralV3Vocabulary)
    static let mistralModel: SystemLanguageModel = {
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: mistral.vocabSize, contextLength: 1024))
        return SystemLanguageModel(try! LoadedModel(weights: weights, tokenizer: mistral, prefixStore: .memoryOnly(memoryByteLimit: 0)))
    }()

    /// Mistral v3 lists the tools in `[AVAILABLE_TOOLS]` before the first `[INST]`, calls
    /// `[TOOL_CALLS][{"name":…,"arguments":…}]</s>` and reads the output in `[TOOL_RESULTS]`.
    @Test func render_mistralListsToolsBeforeTheTurnsAndCallsInAList() async throws {
        let renderer = PromptRenderer(tokenizer: Self.mistral)
        #expect(renderer.callFormat == .toolCallsList)
        #expect(renderer.toolCall == Self.mistral.id(of: "[TOOL_CALLS]") && renderer.callEnd == Self.mistral.eosToken)
        func spelled(_ tokens: [Int]) -> String { InstructTemplateTests.spelled(tokens, Self.mistral) }
        var out = RenderedPrompt()
        renderer.renderInstructions([.text("Be brief."), .tool(WeatherTool()), .tool(CalendarTool())], into: &out)
        let preamble = spelled(out.tokens)
        #expect(preamble.hasPrefix(#"<s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "weather", "description": "Current weather for a city.", "parameters": {"#), "\(preamble)")
        #expect(preamble.contains(#"}}}, {"type": "function", "function": {"name": "calendar""#))
        #expect(preamble.hasSuffix(#""x-order":["day"]}}}][/AVAILABLE_TOOLS][INST] Be brief."# + "\n\n"), "\(preamble)")
        // Each tool is its own segment, in declaration order after the list's opening; the text after them.
        #expect(out.spans.map(\.segment) == [.toolDefinition(name: "weather"), .toolDefinition(name: "calendar"), .instructions(index: 0)])
        // The list between the tokens is JSON: an array of the two definitions.
        let list = preamble.dropFirst("<s>[AVAILABLE_TOOLS] ".count)
        let listEnd = try #require(list.range(of: "[/AVAILABLE_TOOLS]"))
        let json = String(list[..<listEnd.lowerBound])
        let decoded = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]]
        #expect(decoded?.count == 2)
        // What the model says the tools cost is what they render to.
        var bare = RenderedPrompt()
        renderer.renderInstructions([.text("Be brief.")], into: &bare)
        #expect(try await Self.mistralModel.tokenCount(for: [WeatherTool(), CalendarTool()] as [any Tool]) == out.tokens.count - bare.tokens.count)
        // Tools without instructions: the list, then nothing open.
        var toolsOnly = RenderedPrompt()
        renderer.renderInstructions([.tool(WeatherTool())], into: &toolsOnly)
        #expect(spelled(toolsOnly.tokens).hasSuffix("}}][/AVAILABLE_TOOLS]") && toolsOnly.carry == nil)

        let call = Transcript.ToolCalls(calls: [.init(toolName: "weather", arguments: GeneratedContent(properties: ["city": "Lisbon"]))])
        var entries = RenderedPrompt()
        renderer.renderEntry(.toolCalls(call), index: 0, into: &entries)
        renderer.renderEntry(.toolOutput(.init(toolName: "weather", text: "Sunny \"and\" warm")), index: 1, into: &entries)
        #expect(spelled(entries.tokens) == #"[TOOL_CALLS] [{"name":"weather","arguments":{"city":"Lisbon"}}]</s>"#
            + #"[TOOL_RESULTS] {"content": "Sunny \"and\" warm"}[/TOOL_RESULTS]"#)
    }

    @Test func toolCalling_aMistralCallRunsTheToolAndTheNextTurnReusesTheRound() async throws {
        let tool = WeatherTool()
        let session = LanguageModelSession(model: Self.mistralModel, tools: [tool], instructions: "Answer about the weather.")
        let renderer = PromptRenderer(tokenizer: Self.mistral)
        let call = [renderer.toolCall!] + Self.mistral.encode(#"[{"name":"weather","arguments":{"city":"Lisbon"}}]"#, bos: false) + [renderer.callEnd]
        let answer = Self.mistral.encode("It is sunny.", bos: false) + [renderer.end]
        session.steer(call: call, then: answer)
        let response = try await session.respond(to: "Weather in Lisbon?", options: short(80))
        #expect(tool.calls.value.withLock { $0 } == 1)
        #expect(response.content == "It is sunny.")
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "toolCalls", "toolOutput", "response"])
        guard case let .toolCalls(calls) = response.transcriptEntries.dropFirst().first else { Issue.record("no call"); return }
        #expect(calls.calls.map(\.toolName) == ["weather"] && calls.calls.first?.arguments == GeneratedContent(properties: ["city": "Lisbon"]))
        try await session.expectCacheExact()
        let held = try await session.cachedTokens
        session.setTokenSteering(nil)
        let next = try await session.respond(to: "Thanks!", options: short())
        #expect(next.invalidation == nil && next.usage.input.cachedTokenCount == held.count)
        try await session.expectCacheExact()
    }

    /// One required tagged call (the tools' schemas decide its bytes), then an answer.
    struct OneCall: LanguageModelSession.DynamicProfile {
        let weather: WeatherTool
        let seed: UInt64
        var model = TaggedToolCallTests.model
        var body: some LanguageModelSession.DynamicProfile {
            LanguageModelSession.Profile { Instructions("Plan the day."); weather; CalendarTool() }
                .model(model)
                .toolCallingMode(weather.calls.value.withLock { $0 } < 1 ? .required : .disallowed)
                .samplingMode(.random(top: 20, seed: seed))
                .maximumResponseTokens(60)
        }
    }

    @Test(arguments: ["ChatML", "Llama 3", "Mistral v3"])
    func toolCalling_requiredTaggedCallsAreValidForTheOfferedTools(vocabulary name: String) async throws {
        let (model, vocabulary) = switch name {
        case "ChatML": (Self.model, Self.vocabulary)
        case "Llama 3": (Self.llama3Model, Self.llama3)
        default: (Self.mistralModel, Self.mistral)
        }
        var names: Set<String> = []
        for seed in 0 ..< 4 {
            let weather = WeatherTool()
            let session = LanguageModelSession(profile: OneCall(weather: weather, seed: UInt64(seed), model: model))
            let response = try await session.respond(to: "Lisbon, tomorrow?")
            guard case let .toolCalls(calls) = response.transcriptEntries.dropFirst().first, let call = calls.calls.first else {
                Issue.record("seed \(seed) made no call"); continue
            }
            names.insert(call.toolName)
            #expect(["weather", "calendar"].contains(call.toolName))
            if call.toolName == "weather" { _ = try WeatherQuery(call.arguments) } else { _ = try DayQuery(call.arguments) }
            // The call's ids spell the tagged JSON of what was parsed.
            let renderer = PromptRenderer(tokenizer: vocabulary)
            let ids = try #require(calls.tokenIDs)
            #expect(ids.last == renderer.callEnd && (renderer.callOpensWithJSON ? renderer.opensJSONObject(ids[0]) : ids.first == renderer.toolCall))
            let body = ids.dropFirst(renderer.callOpensWithJSON ? 0 : 1).dropLast()
            #expect(vocabulary.decode(Array(body)) == renderer.callBody(name: call.toolName, arguments: call.arguments.jsonString))
            try await session.expectCacheExact()
        }
        #expect(!names.isEmpty)
    }
}
