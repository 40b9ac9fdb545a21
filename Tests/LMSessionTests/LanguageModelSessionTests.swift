import Foundation
@testable import LMSession
import LMRuntime
import LMTestSupport
import Testing

struct LanguageModelSessionTests {
    static let instructions = "You are a friendly running coach. Answer briefly."

    @Test func respond_multiTurnAppendReusesEveryTokenOfThePreviousTurn() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let prompts = ["How far should I run today?", "And tomorrow?", "What should I eat after the long run?", "Thanks!"]
        var previous: LanguageModelSession.Response<String>?
        for (turn, prompt) in prompts.enumerated() {
            let response = try await session.respond(to: prompt, options: short(5 + turn))
            #expect(response.usage.output.totalTokenCount == 5 + turn)
            if let previous {
                // Everything the previous turn rendered, its response, and the closing marker.
                let expected = previous.usage.input.totalTokenCount + previous.usage.output.totalTokenCount + 1
                #expect(response.usage.input.cachedTokenCount == expected)
                #expect(response.usage.input.totalTokenCount == expected + Count.prompt(prompt) + 1)
                #expect(response.invalidation == nil)
            } else {
                #expect(response.usage.input.cachedTokenCount == 0)
                #expect(response.usage.input.totalTokenCount == Count.instructions([Self.instructions]) + Count.prompt(prompt) + 1)
                #expect(response.invalidation?.reason == .emptyCache)
            }
            #expect(response.usage.computedTokenCount == response.usage.input.totalTokenCount - response.usage.input.cachedTokenCount)
            try await session.expectCacheExact()
            previous = response
        }
        #expect(session.transcript.count == 1 + 2 * prompts.count)
        #expect(session.usage.output.totalTokenCount == 5 + 6 + 7 + 8)
        #expect(session.usage.input.cachedTokenCount > 0 && session.usage.cacheHitRate > 0.5)
    }

    @Test func respond_changedInstructionsRecomputeFromTheFirstDifferingToken() async throws {
        let state = AppState()
        let session = LanguageModelSession(model: tinyModel, dynamicInstructions: DynamicInstructionsClosure {
            Instructions("Request number \(state.counter). You are a cooking assistant.")
        })
        _ = try await session.respond(to: "Suggest a soup.", options: short())
        state.counter = 7
        let response = try await session.respond(to: "Suggest a salad.", options: short())
        let before = tokenizer.encode("Request number 0. You are a cooking assistant.", bos: false)
        let after = tokenizer.encode("Request number 7. You are a cooking assistant.", bos: false)
        let same = zip(before, after).prefix { $0 == $1 }.count
        #expect(response.usage.input.cachedTokenCount == 2 + same)
        #expect(response.invalidation?.position == 2 + same)
        #expect(response.invalidation?.segment == .instructions(index: 0))
        #expect(response.invalidation?.reason == .prefixChanged)
        try await session.expectCacheExact()
    }

    @Test(arguments: [true, false])
    func respond_conditionalInstructionKeepsExactlyTheTokensBeforeIt(conditionalLast: Bool) async throws {
        let state = AppState()
        let fixed = "You are a presentation editor. Keep slides short and clear."
        let session = LanguageModelSession(model: tinyModel, dynamicInstructions: DynamicInstructionsClosure {
            if !conditionalLast { if state.flag { "The user is editing images." } else { "The user is editing text." } }
            fixed
            if conditionalLast { if state.flag { "The user is editing images." } else { "The user is editing text." } }
        })
        _ = try await session.respond(to: "Improve slide two.", options: short())
        state.flag = true
        let response = try await session.respond(to: "Improve slide three.", options: short())
        let edited = tokenizer.encode("The user is editing text.", bos: false)
        let toggled = tokenizer.encode("The user is editing images.", bos: false)
        let same = zip(edited, toggled).prefix { $0 == $1 }.count
        let conditionalStart = 2 + (conditionalLast ? tokenizer.encode(fixed, bos: false).count : 0)
        #expect(response.usage.input.cachedTokenCount == conditionalStart + same)
        #expect(response.invalidation?.segment == .instructions(index: conditionalLast ? 1 : 0))
        try await session.expectCacheExact()
    }

    @Test func respond_toolAddedMidSessionRecomputesFromTheToolDefinitions() async throws {
        let state = AppState()
        let text = "You are a helpful assistant in a travel app."
        let session = LanguageModelSession(model: tinyModel, dynamicInstructions: DynamicInstructionsClosure {
            text
            WeatherTool()
            if state.flag { CalendarTool() }
        })
        _ = try await session.respond(to: "Plan my Saturday.", options: short())
        state.flag = true
        let response = try await session.respond(to: "And Sunday?", options: short())
        // The weather definition loses its closing marker to the new last tool: recomputation
        // starts right after the weather tool's text, where the calendar definition begins.
        let kept = 2 + tokenizer.encode(text, bos: false).count + tokenizer.encode(Count.tool(WeatherTool()), bos: false).count
        #expect(response.usage.input.cachedTokenCount == kept)
        #expect(response.invalidation?.segment == .toolDefinition(name: "calendar"))
        #expect(session.transcript.entries.first == .instructions(.init(texts: [text],
            toolDefinitions: [WeatherTool().definition, CalendarTool().definition])))
    }

    @Test func respond_overflowThrowsBeforeComputingAndChangesNothing() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        _ = try await session.respond(to: "Hello coach.", options: short())
        let transcript = session.transcript
        let cached = try await session.cachedTokens
        let usage = session.usage
        let prompt = String(repeating: "run ", count: 300)
        let expectedPrompt = cached.count + Count.prompt(prompt) + 1
        do {
            _ = try await session.respond(to: Prompt(prompt), options: short(800))
            Issue.record("an oversized request was accepted")
        } catch let LanguageModelError.contextSizeExceeded(e) {
            #expect(e.contextSize == 1024)
            #expect(e.promptTokenCount == expectedPrompt)
            #expect(e.tokenCount == expectedPrompt + 800 && e.responseBudget == 800)
        }
        #expect(session.transcript == transcript)
        #expect(try await session.cachedTokens == cached)
        #expect(session.usage == usage)
        #expect(!session.isResponding)
        let next = try await session.respond(to: "Shorter question?", options: short())
        #expect(next.usage.input.cachedTokenCount == cached.count)
        try await session.expectCacheExact()
    }

    @Test(arguments: [LanguageModelSession.TranscriptErrorHandlingPolicy.preserveTranscript, .revertTranscript])
    func respond_windowReachedMidResponseFollowsThePolicy(policy: LanguageModelSession.TranscriptErrorHandlingPolicy) async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        session.transcriptErrorHandlingPolicy = policy
        let prompt = String(repeating: "pace ", count: 200)
        do {
            _ = try await session.respond(to: Prompt(prompt))   // no limit: runs into the window
            Issue.record("the window was not reported")
        } catch let LanguageModelError.contextSizeExceeded(e) {
            #expect(e.contextSize == 1024 && e.tokenCount == 1024 + 1)
        }
        let entries = session.transcript.history
        if policy == .preserveTranscript {
            #expect(entries.count == 2)
            guard case let .response(partial) = entries.last else { Issue.record("no partial response"); return }
            #expect(e_count(partial) == 1024 - (Count.instructions([Self.instructions]) + Count.prompt(prompt) + 1) + 1)
        } else {
            #expect(entries.isEmpty)
        }
        #expect(!session.isResponding)
        try await session.expectCacheExact()
    }

    private func e_count(_ r: Transcript.Response) -> Int { r.tokenIDs.count }

    @Test func respond_forcedTokenOutsideTheVocabulary_isATypedRuntimeErrorAndChangesNothing() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        session.setTokenSteering { generated in generated.isEmpty ? 5 : 1_000_000 }
        await #expect(throws: LanguageModelError.runtime(.tokenOutOfVocabulary(token: 1_000_000, index: 0, vocabSize: tokenizer.vocabSize))) {
            try await session.respond(to: "Hi", options: GenerationOptions(maximumResponseTokens: 4))
        }
        #expect(session.transcript.history.isEmpty && !session.isResponding)
        session.setTokenSteering(nil)
        _ = try await session.respond(to: "Hi", options: GenerationOptions(maximumResponseTokens: 2))
        try await session.expectCacheExact()
    }

    @Test func respond_transcriptReplacedMidRequest_throwsAndTheReplacementStands() async throws {
        let gate = GateTool()
        let session = LanguageModelSession(model: tinyModel, tools: [gate], instructions: Self.instructions)
        _ = try await session.respond(to: "Hello.", options: short(4))
        let saved = session.transcript
        _ = try await session.respond(to: "And then?", options: short(4))
        session.setTokenSteering(try gate.steering())
        let request = Task { try await session.respond(to: "Tell me a long story.", options: short(30)) }
        try await gate.waitUntilEntered(by: request)   // in flight, inside its tool call
        session.transcript = saved          // the app rolls the conversation back meanwhile
        let before = session.usage
        gate.gate.open()
        await #expect(throws: LanguageModelSession.Error.transcriptMutationWhileResponding) { try await request.value }
        #expect(session.transcript == saved && !session.isResponding)
        #expect(session.usage.output.totalTokenCount == before.output.totalTokenCount + 30)   // the work done still counts
        // The next request continues the replacement, on an exact cache.
        session.setTokenSteering(nil)
        let next = try await session.respond(to: "Go on.", options: short(4))
        #expect(session.transcript.entries.dropLast(2) == saved.entries)
        #expect(next.usage.input.cachedTokenCount > 0)
        try await session.expectCacheExact()
        // A replacement between requests is no mutation of a running one.
        session.transcript = saved
        _ = try await session.respond(to: "Again.", options: short(4))
        #expect(session.transcript.history.count == saved.history.count + 2)
    }

    @Test func respond_needingACapabilityTheModelLacks_throwsBeforeComputingAnything() async throws {
        struct Plain: LanguageModel {   // a model that only generates text
            func loaded() throws -> LoadedModel { try tinyModel.loaded() }
            var capabilities: LanguageModelCapabilities { LanguageModelCapabilities([]) }
        }
        #expect(tinyModel.capabilities == LanguageModelCapabilities([.guidedGeneration, .toolCalling, .reasoning]))
        let session = LanguageModelSession(model: Plain(), tools: [GateTool()], instructions: Self.instructions)
        func lacking(_ request: () async throws -> Void) async -> LanguageModelCapabilities.Capability? {
            do { try await request() } catch let LanguageModelError.unsupportedCapability(e) { return e.capability } catch {}
            return nil
        }
        #expect(await lacking { _ = try await session.respond(to: "Hi", options: short()) } == .toolCalling)
        let noTools = GenerationOptions(maximumResponseTokens: 4, toolCallingMode: .disallowed)
        #expect(await lacking { _ = try await session.respond(to: "Hi", generating: Bool.self, options: noTools) } == .guidedGeneration)
        #expect(await lacking {
            _ = try await session.respond(to: "Hi", options: noTools, contextOptions: ContextOptions(reasoningLevel: .light))
        } == .reasoning)
        #expect(session.transcript.history.isEmpty && session.usage.input.totalTokenCount == 0)
        #expect(try await session.cachedTokens.isEmpty)
        // What it can do, it does.
        let text = try await session.respond(to: "Hi", options: noTools)
        #expect(text.usage.output.totalTokenCount == 4 && session.transcript.history.count == 2)
    }

    @Test func respond_secondRequestWhileRespondingThrowsAndDoesNotDisturbTheFirst() async throws {
        let gate = GateTool()
        let session = LanguageModelSession(model: tinyModel, tools: [gate], instructions: Self.instructions)
        session.setTokenSteering(try gate.steering())
        let first = Task { try await session.respond(to: "Tell me a long story.", options: short(30)) }
        try await gate.waitUntilEntered(by: first)   // the first request is in flight, inside its tool call
        #expect(session.isResponding)
        await #expect(throws: LanguageModelSession.Error.concurrentRequests) {
            try await session.respond(to: "Are you there?", options: short())
        }
        gate.gate.open()
        let response = try await first.value
        #expect(response.usage.output.totalTokenCount == 30)
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "toolCalls", "toolOutput", "response"])
        #expect(session.transcript.history.count == 4)
        try await session.expectCacheExact()
    }

    @Test func respond_invalidOptionsAreRejectedByName() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        for (options, name, word) in [(GenerationOptions(maximumResponseTokens: -1), "maximumResponseTokens", "negative"),
                                      (GenerationOptions(temperature: -2), "temperature", "≥ 0"),
                                      (GenerationOptions(samplingMode: .random(top: 0)), "samplingMode", "top"),
                                      (GenerationOptions(samplingMode: .random(probabilityThreshold: 1.5)), "samplingMode", "probabilityThreshold")] {
            do {
                _ = try await session.respond(to: "Hi", options: options)
                Issue.record("accepted \(options)")
            } catch let LanguageModelError.invalidOptions(option, reason) {
                #expect(option == name && reason.contains(word))
            }
        }
        #expect(session.transcript.history.isEmpty)
    }

    @Test func respond_sameSeedSameTextAcrossSessions() async throws {
        let options = GenerationOptions(samplingMode: .random(top: 40, seed: 11), temperature: 0.9, maximumResponseTokens: 12)
        let a = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let b = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let ra = try await a.respond(to: "Plan my week.", options: options)
        let rb = try await b.respond(to: "Plan my week.", options: options)
        #expect(ra.content == rb.content && !ra.content.isEmpty)
        #expect(ra.transcriptEntries == rb.transcriptEntries)
    }

    /// Texts are looked up by their bytes: two canonically equivalent spellings are one `String`
    /// but tokenize differently, and each gets its own ids. The cache never holds more than its
    /// limit, except for one text longer than the limit alone.
    @Test func textTokenCache_givesTheTokenizersIdsKeyedByBytesAndStaysBounded() {
        let cache = TextTokenCache(tokenizer: tokenizer, tokenLimit: 40)
        let composed = "caf\u{E9} au lait", decomposed = "cafe\u{301} au lait"
        #expect(composed == decomposed && tokenizer.encode(composed, bos: false) != tokenizer.encode(decomposed, bos: false))
        for text in [composed, decomposed, composed, decomposed] + Fixtures.trickyTexts + Fixtures.trickyTexts {
            let ids = cache.tokens(text)
            #expect(ids == tokenizer.encode(text, bos: false), "\(text.debugDescription)")
            #expect(cache.counts.tokens <= max(cache.tokenLimit, ids.count))
        }
        #expect(cache.counts.hits >= 2 && cache.counts.hits + cache.counts.misses == 4 + 2 * Fixtures.trickyTexts.count)
    }

    /// Each request renders the whole transcript, but tokenizes only text it has not seen: the
    /// instructions once, then one new prompt a turn.
    @Test func respond_tokenizesOnlyTheNewPromptOfEachTurn() async throws {
        let model = SystemLanguageModel(named: "tiny", prefixStore: .memoryOnly(memoryByteLimit: 0))   // its own counts
        let session = LanguageModelSession(model: model, instructions: Self.instructions)
        let texts = try model.loaded().texts
        for (turn, prompt) in ["How far should I run today?", "And tomorrow?", "What should I eat after it?"].enumerated() {
            let before = texts.counts
            _ = try await session.respond(to: prompt, options: short())
            let after = texts.counts
            #expect(after.misses - before.misses == (turn == 0 ? 2 : 1), "turn \(turn)")
            #expect(after.hits - before.hits == (turn == 0 ? 0 : 1 + turn), "turn \(turn): the instructions and the earlier prompts")
            try await session.expectCacheExact()
        }
        // Counting what the session sent finds every text too.
        let before = texts.counts
        #expect(try await model.tokenCount(for: session.transcript) > 0)
        #expect(texts.counts.misses == before.misses && texts.counts.hits > before.hits)
    }
}
