import Foundation
@testable import LMSession
import LMRuntime
import LMTestSupport
import Testing

struct PrewarmAndRehydrationTests {
    static let instructions = "You are a travel assistant. Keep answers short."

    func savedTranscript() async throws -> Transcript {
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        for prompt in ["Plan a weekend in Porto.", "Where should we eat?", "And on Sunday?"] {
            _ = try await session.respond(to: prompt, options: short())
        }
        let data = try JSONEncoder().encode(session.transcript)
        let restored = try JSONDecoder().decode(Transcript.self, from: data)
        #expect(restored == session.transcript)
        return restored
    }

    @Test func rehydrated_firstRequestComputesTheWholeTranscript() async throws {
        let saved = try await savedTranscript()
        let session = LanguageModelSession(model: tinyModel, transcript: saved)
        let response = try await session.respond(to: "Is it far?", options: short())
        #expect(response.usage.input.cachedTokenCount == 0)
        #expect(response.invalidation?.reason == .emptyCache)
        #expect(response.usage.computedTokenCount == response.usage.input.totalTokenCount)
        #expect(session.transcript.history.count == saved.history.count + 2)
    }

    @Test func rehydrated_textOnlyTranscript_rendersItsResponsesTokenized() async throws {
        // As Apple-shaped code saves it: responses as text, no token ids.
        let json = #"""
        {"entries":[{"instructions":{"_0":{"texts":["Be brief."],"toolDefinitions":[]}}},
                    {"prompt":{"_0":{"text":"Plan a weekend in Porto."}}},
                    {"response":{"_0":{"text":"Walk the riverside and eat by the bridge."}}}]}
        """#
        let transcript = try JSONDecoder().decode(Transcript.self, from: Data(json.utf8))
        guard case let .response(r) = transcript.entries[2] else { Issue.record("no response"); return }
        #expect(r.tokenIDs.isEmpty && r.text.hasPrefix("Walk"))
        let session = LanguageModelSession(model: tinyModel, transcript: transcript)
        let response = try await session.respond(to: "And Sunday?", options: short())
        let expected = Count.instructions(["Be brief."]) + Count.prompt("Plan a weekend in Porto.")
            + 1 + tokenizer.encode("Walk the riverside and eat by the bridge.", bos: false).count + 1
            + Count.prompt("And Sunday?") + 1
        #expect(response.usage.input.totalTokenCount == expected, "the response's text is part of what the model reads")
        try await session.expectCacheExact()
    }

    @Test func rehydrated_afterPrewarmComputesOnlyTheNewPrompt() async throws {
        let saved = try await savedTranscript()
        let session = LanguageModelSession(model: tinyModel, transcript: saved)
        session.prewarm()
        let response = try await session.respond(to: "Is it far?", options: short())
        let newPart = Count.prompt("Is it far?") + 1
        #expect(response.usage.input.cachedTokenCount == response.usage.input.totalTokenCount - newPart)
        #expect(response.usage.computedTokenCount == newPart)
        #expect(response.invalidation == nil)
        // Nothing computed twice: prewarm + request = the rendered length.
        #expect(session.usage.computedTokenCount == response.usage.input.totalTokenCount)
        try await session.expectCacheExact()
    }

    @Test func prewarmPromptPrefix_requestComputesOnlyTheTokensAfterThePrefix() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        session.prewarm(promptPrefix: "Suggest a recipe using")
        let response = try await session.respond(to: "Suggest a recipe using lentils and lemon", options: short())
        let prefix = tokenizer.encode("Suggest a recipe using", bos: false)
        let whole = tokenizer.encode("Suggest a recipe using lentils and lemon", bos: false)
        #expect(Array(whole.prefix(prefix.count)) == prefix)
        let cached = Count.instructions([Self.instructions]) + 1 + prefix.count
        #expect(response.usage.input.cachedTokenCount == cached)
        #expect(response.usage.computedTokenCount == whole.count - prefix.count + 2)   // rest, <|end|>, header
        #expect(session.usage.computedTokenCount == response.usage.input.totalTokenCount)
        try await session.expectCacheExact()
    }

    @Test func prewarm_requestArrivingMeanwhileWaitsAndNothingIsComputedTwice() async throws {
        let saved = try await savedTranscript()
        for _ in 0 ..< 3 {
            let session = LanguageModelSession(model: tinyModel, transcript: saved)
            session.prewarm()
            async let response = session.respond(to: "One more thing.", options: short())
            let r = try await response
            #expect(session.usage.computedTokenCount == r.usage.input.totalTokenCount)
            #expect(r.usage.input.cachedTokenCount + r.usage.computedTokenCount == r.usage.input.totalTokenCount)
        }
    }

    @Test func promptEntry_keepsItsOptionsWhichRenderNothing() async throws {
        let options = GenerationOptions(samplingMode: .random(top: 5, seed: 3), temperature: 0.7, maximumResponseTokens: 6,
                                        toolCallingMode: .disallowed)
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let response = try await session.respond(to: "Plan a weekend in Porto.", options: options)
        guard case let .prompt(p)? = response.transcriptEntries.first else { Issue.record("no prompt entry"); return }
        #expect(p.options == options)
        // A transcript saved before prompts kept their options reads with the defaults.
        let old = try JSONDecoder().decode(Transcript.Prompt.self, from: Data(#"{"text":"Hi"}"#.utf8))
        #expect(old.options == GenerationOptions() && old.responseFormat == nil)
        // The options are not part of what the model reads: the same history with other options
        // renders the same tokens, so a rehydrated session reuses everything the first one cached.
        var edited = session.transcript
        edited.entries = edited.entries.map { entry in
            guard case var .prompt(p) = entry else { return entry }
            p.options = GenerationOptions()
            return .prompt(p)
        }
        let renderer = PromptRenderer(tokenizer: tokenizer)
        let components: [InstructionComponent] = [.text(Self.instructions)]
        #expect(renderer.render(components, history: edited.history, prompt: nil).tokens
            == renderer.render(components, history: session.transcript.history, prompt: nil).tokens)
    }

    @Test func responseEntry_idsOfAnotherTokenizerRenderAsItsText() async throws {
        let renderer = PromptRenderer(tokenizer: tokenizer)
        let ids = [300, 301, 302], text = "Walk the riverside."
        func rendered(_ assetIDs: [String]) -> [Int] {
            var out = RenderedPrompt()
            renderer.renderEntry(.response(.init(text: text, tokenIDs: ids, assetIDs: assetIDs)), index: 0, into: &out)
            return Array(out.tokens.dropFirst(renderer.assistant.count).dropLast())
        }
        #expect(rendered([]) == ids)                                   // unknown origin: taken as this model's
        #expect(rendered([renderer.assetID, "com.example.adapter"]) == ids)
        #expect(rendered(["com.example.adapter"]) == ids)              // only a tokenizer's id decides
        #expect(rendered(["tokenizer:0123456789abcdef"]) == tokenizer.encode(text, bos: false))
        // Every generated response says which tokenizer its ids are in.
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let response = try await session.respond(to: "Plan a weekend in Porto.", options: short())
        guard case let .response(r)? = response.transcriptEntries.last else { Issue.record("no response"); return }
        #expect(r.assetIDs == ["tokenizer:" + tokenizer.identity])
        // FoundationModels' initializer: text from the segments, no ids; one structure is the value.
        let value = Transcript.StructuredSegment(source: "Plan", content: GeneratedContent(properties: ["days": 2]))
        let built = Transcript.Response(assetIDs: ["a"], segments: [.structure(value)])
        #expect(built.structure == value && built.text == #"{"days":2}"# && built.tokenIDs.isEmpty)
        #expect(Transcript.Response(assetIDs: [], segments: [.text(.init(content: "a")), .text(.init(content: "b"))]).text == "a\nb")
    }

    /// A saved transcript may come from anywhere: ids outside the vocabulary are not the model's,
    /// so the entry renders its text and the session answers (before, every request was refused).
    @Test func responseAndToolCalls_idsOutsideTheVocabularyRenderTheirText() async throws {
        let renderer = PromptRenderer(tokenizer: tokenizer)
        let text = "Walk the riverside."
        for ids in [[300, tokenizer.vocabSize, 302], [300, -1], []] {
            var out = RenderedPrompt()
            renderer.renderEntry(.response(.init(text: text, tokenIDs: ids, assetIDs: [])), index: 0, into: &out)
            #expect(Array(out.tokens.dropFirst(renderer.assistant.count).dropLast()) == tokenizer.encode(text, bos: false), "\(ids)")
        }
        let calls = [Transcript.ToolCall(toolName: "weather", arguments: GeneratedContent(properties: ["city": "Lisbon"]))]
        var out = RenderedPrompt()
        renderer.renderEntry(.toolCalls(.init(calls: calls, tokenIDs: [1, 1 << 40])), index: 0, into: &out)
        #expect(Array(out.tokens.dropFirst(renderer.assistant.count))
            == [renderer.toolCall!] + tokenizer.encode(#"weather {"city":"Lisbon"}"#, bos: false) + [renderer.end])
        let transcript = Transcript(entries: [.instructions(.init(texts: ["Be brief."])), .prompt(.init(text: "Hi.")),
                                              .response(.init(text: text, tokenIDs: [1171, 347_133], assetIDs: []))])
        let session = LanguageModelSession(model: tinyModel, transcript: transcript)
        let response = try await session.respond(to: "And Sunday?", options: short())
        #expect(response.transcriptEntries.count == 2 && session.transcript.history.count == 4)
        try await session.expectCacheExact()
    }

    /// The instructions are in the transcript from the start: a restored transcript read back
    /// before any request is the one restored (entry ids included), and a session's own
    /// instructions keep their entry (and id) across requests that resolve them unchanged.
    @Test func transcript_holdsItsInstructionsBeforeAnyRequest() async throws {
        let saved = try await savedTranscript()
        let restored = LanguageModelSession(model: tinyModel, transcript: saved)
        #expect(restored.transcript == saved && restored.transcript.map(\.id) == saved.map(\.id))
        let session = LanguageModelSession(model: tinyModel, tools: [WeatherTool()], instructions: Self.instructions)
        guard case let .instructions(first)? = session.transcript.first else { Issue.record("no instructions"); return }
        #expect(first.texts == [Self.instructions] && first.toolDefinitions.map(\.name) == ["weather"])
        _ = try await session.respond(to: "Hi.", options: short())
        #expect(session.transcript.first?.id == first.id && session.transcript.first == .instructions(first))
    }

    @Test func toolCallsEntry_idsOfAnotherTokenizerRenderAsTheCallsText() throws {
        let renderer = PromptRenderer(tokenizer: tokenizer)
        let calls = [Transcript.ToolCall(toolName: "weather", arguments: GeneratedContent(properties: ["city": "Lisbon"]))]
        let ids = [300, 301, 302]
        func rendered(_ entry: Transcript.ToolCalls) -> [Int] {
            var out = RenderedPrompt()
            renderer.renderEntry(.toolCalls(entry), index: 0, into: &out)
            return Array(out.tokens.dropFirst(renderer.assistant.count))
        }
        let text = rendered(.init(calls: calls))   // no ids: the calls' own text
        #expect(text == [renderer.toolCall!] + tokenizer.encode(#"weather {"city":"Lisbon"}"#, bos: false) + [renderer.end])
        #expect(rendered(.init(calls: calls, tokenIDs: ids)) == ids)              // unknown origin: this model's
        #expect(rendered(.init(calls: calls, tokenIDs: ids, assetIDs: [renderer.assetID])) == ids)
        #expect(rendered(.init(calls: calls, tokenIDs: ids, assetIDs: ["tokenizer:0123456789abcdef"])) == text)
        // Saved before calls kept asset ids: read as unknown origin.
        let old = try JSONDecoder().decode(Transcript.ToolCalls.self, from: Data(#"{"calls":[],"tokenIDs":[1,2]}"#.utf8))
        #expect(old.assetIDs.isEmpty && old.tokenIDs == [1, 2])
    }

    @Test func transcriptMetadata_rendersNothing() {
        let renderer = PromptRenderer(tokenizer: tokenizer)
        let arguments = GeneratedContent(properties: ["city": "Lisbon"])
        let segments: [Transcript.Segment] = [.text(.init(content: "It is sunny."))]
        let with: [Transcript.Entry] = [
            .prompt(.init(text: "Weather?", metadata: ["user": "u1"])),
            .toolCalls(.init([Transcript.ToolCall(metadata: ["retry": true], toolName: "weather", arguments: arguments)])),
            .response(.init(metadata: ["source": "cache"], segments: segments)),
        ]
        let without: [Transcript.Entry] = [
            .prompt(.init(text: "Weather?")),
            .toolCalls(.init([Transcript.ToolCall(toolName: "weather", arguments: arguments)])),
            .response(.init(segments: segments)),
        ]
        #expect(with != without)
        let components: [InstructionComponent] = [.text(Self.instructions)]
        #expect(renderer.render(components, history: with, prompt: nil).tokens == renderer.render(components, history: without, prompt: nil).tokens)
    }

    @Test func transcript_codableRoundTripAndHistory() throws {
        let transcript = Transcript(entries: [
            .instructions(.init(texts: ["Be brief."], toolDefinitions: [WeatherTool().definition])),
            .prompt(.init(text: "Weather?")),
            .toolCalls(.init(calls: [.init(toolName: "weather", arguments: GeneratedContent(properties: ["city": "Lisbon"]))], tokenIDs: [262, 5, 6, 264])),
            .toolOutput(.init(toolName: "weather", text: "Sunny")),
            .response(.init(text: "It is sunny.", tokenIDs: [10, 11, 12])),
        ])
        let data = try JSONEncoder().encode(transcript)
        #expect(try JSONDecoder().decode(Transcript.self, from: data) == transcript)
        #expect(transcript.history.count == 4 && transcript.history.first?.kind == "prompt")
        #expect(transcript.map(\.kind) == ["instructions", "prompt", "toolCalls", "toolOutput", "response"])
    }
}
