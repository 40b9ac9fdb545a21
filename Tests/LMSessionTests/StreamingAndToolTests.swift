import Foundation
@testable import LMSession
import LMRuntime
import LMTestSupport
import Synchronization
import Testing

struct StreamingAndToolTests {
    static let instructions = "You are a helpful assistant in a weather app."

    struct SwitchingProfile: LanguageModelSession.DynamicProfile {
        let state: AppState
        var body: some LanguageModelSession.DynamicProfile {
            if state.flag {
                LanguageModelSession.Profile { Instructions("You edit images. Be precise.") }.model(tinyModel)
            } else {
                LanguageModelSession.Profile { Instructions("You edit text. Be precise.") }.model(tinyModel)
            }
        }
    }

    @Test func profileSwitch_isADeliberateResetReportedAsSuch() async throws {
        let state = AppState()
        let session = LanguageModelSession(profile: SwitchingProfile(state: state))
        _ = try await session.respond(to: "Crop the photo.", options: short())
        let same = try await session.respond(to: "Now rotate it.", options: short())
        #expect(same.invalidation == nil && same.usage.input.cachedTokenCount > 0)
        state.flag = true
        let switched = try await session.respond(to: "Fix the caption.", options: short())
        #expect(switched.invalidation?.reason == .profileSwitch)
        #expect(switched.invalidation?.position == 0)
        #expect(switched.usage.input.cachedTokenCount == 0)
        #expect(switched.invalidation?.discardedTokenCount == same.usage.input.totalTokenCount + same.usage.output.totalTokenCount + 1)
        let after = try await session.respond(to: "Thanks.", options: short())
        #expect(after.invalidation == nil)   // the new profile's prefix is reused again
        try await session.expectCacheExact()
    }

    @Test func streamResponse_snapshotsGrowAndTheLastEqualsRespondWithTheSameSeed() async throws {
        let options = GenerationOptions(samplingMode: .random(probabilityThreshold: 0.9, seed: 5), maximumResponseTokens: 10)
        let streaming = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let stream = streaming.streamResponse(to: "Will it rain?", options: options)
        var snapshots: [String] = []
        var counts: [Int] = []
        for try await snapshot in stream {
            snapshots.append(snapshot.content)
            counts.append(snapshot.usage.output.totalTokenCount)
        }
        let final = try await stream.collect()
        #expect(counts == Array(1 ... 10))
        for (a, b) in zip(snapshots, snapshots.dropFirst()) { #expect(b.count >= a.count) }
        let plain = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let response = try await plain.respond(to: "Will it rain?", options: options)
        #expect(snapshots.last == response.content && final.content == response.content)
        #expect(final.usage.input == response.usage.input)
    }

    @Test func cancellation_midDecodeLeavesTheSessionUsableAndTheCacheExact() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        _ = try await session.respond(to: "Hello.", options: short())
        let transcript = session.transcript
        // The request cancels its own task after five decoded tokens: a cancellation mid-decode.
        session.setTokenSteering { generated in
            if generated.count == 5 { withUnsafeCurrentTask { $0?.cancel() } }
            return nil
        }
        let task = Task { try await session.respond(to: "Tell me everything about clouds.", options: short(500)) }
        await #expect(throws: CancellationError.self) { try await task.value }
        session.setTokenSteering(nil)
        #expect(session.transcript == transcript && !session.isResponding)
        try await session.expectCacheExact()
        let next = try await session.respond(to: "Short answer please.", options: short())
        #expect(next.usage.input.cachedTokenCount > 0)
        #expect(session.transcript.history.count == transcript.history.count + 2)
        try await session.expectCacheExact()
    }

    @Test func streamResponse_consumerCancellationStopsGeneration() async throws {
        let gate = GateTool()
        let session = LanguageModelSession(model: tinyModel, tools: [gate], instructions: Self.instructions)
        session.setTokenSteering(try gate.steering())
        let stream = session.streamResponse(to: "Stream a long answer.", options: short(500))
        let consumer = Task { for try await _ in stream {} }
        try await gate.waitUntilEntered(by: consumer)
        consumer.cancel()           // the consumer goes away while the request is in its tool call
        gate.gate.open()
        await #expect(throws: CancellationError.self) { try await stream.collect() }
        #expect(session.transcript.history.isEmpty && !session.isResponding)
        try await session.expectCacheExact()
    }

    @Test func toolCalling_recordsTheCallRunsTheToolAndContinues() async throws {
        let tool = WeatherTool()
        let session = LanguageModelSession(model: tinyModel, tools: [tool], instructions: Self.instructions)
        let renderer = PromptRenderer(tokenizer: tokenizer)
        let call = [renderer.toolCall!] + tokenizer.encode(#"weather {"city":"Lisbon"}"#, bos: false) + [renderer.end]
        let answer = tokenizer.encode("It is sunny.", bos: false) + [renderer.end]
        session.steer(call: call, then: answer)   // the call, then (after the tool output) a fixed answer
        let response = try await session.respond(to: "What is the weather in Lisbon?", options: short(20))
        #expect(tool.calls.value.withLock { $0 } == 1)
        #expect(response.content == "It is sunny.")
        let kinds = response.transcriptEntries.map(\.kind)
        #expect(kinds == ["prompt", "toolCalls", "toolOutput", "response"])
        #expect(response.transcriptEntries.dropFirst().first == .toolCalls(.init(
            calls: [.init(toolName: "weather", arguments: GeneratedContent(properties: ["city": "Lisbon"]))], tokenIDs: call,
            assetIDs: [renderer.assetID])))
        #expect(response.transcriptEntries.dropFirst(2).first == .toolOutput(.init(toolName: "weather", text: "Sunny, 21 degrees in Lisbon")))
        try await session.expectCacheExact()
        // The next turn reuses everything, the tool round included.
        session.setTokenSteering(nil)
        let next = try await session.respond(to: "Thanks!", options: short())
        #expect(next.invalidation == nil)
        #expect(next.usage.input.totalTokenCount - next.usage.input.cachedTokenCount == Count.prompt("Thanks!") + 1)
    }

    @Test func toolCalling_callsAreDecodedUnderTheOfferedToolsSchemas() async throws {
        // Steering tries an unknown tool and malformed arguments; the grammar refuses both, so the
        // model's own choices make the call: always an offered tool with valid arguments.
        for seed in 0 ..< 4 {
            let tool = WeatherTool()
            let session = LanguageModelSession(model: tinyModel, tools: [tool, CalendarTool()], instructions: Self.instructions)
            let renderer = PromptRenderer(tokenizer: tokenizer)
            let bad = [renderer.toolCall!] + tokenizer.encode("teleport Mars", bos: false)
            session.setTokenSteering { generated in generated.count < bad.count ? bad[generated.count] : nil }
            let options = GenerationOptions(samplingMode: .random(top: 20, seed: UInt64(seed)), maximumResponseTokens: 40)
            let response = try await session.respond(to: "Beam me up.", options: options)
            guard case let .toolCalls(calls) = response.transcriptEntries.dropFirst().first else {
                Issue.record("no call was made"); return
            }
            let call = try #require(calls.calls.first)
            #expect(["weather", "calendar"].contains(call.toolName))
            if call.toolName == "weather" {
                _ = try WeatherQuery(call.arguments)
                #expect(tool.calls.value.withLock { $0 } >= 1)
            } else {
                _ = try DayQuery(call.arguments)
            }
            try await session.expectCacheExact()
        }
    }

    /// Requires a tool call in every round until the tool has run `rounds` times, then disallows
    /// calls: Apple's pattern, the profile being read again after each tool round.
    struct RequiredRounds: LanguageModelSession.DynamicProfile {
        let tool: WeatherTool
        let rounds: Int
        var body: some LanguageModelSession.DynamicProfile {
            LanguageModelSession.Profile { Instructions(StreamingAndToolTests.instructions); tool }
                .model(tinyModel)
                .toolCallingMode(tool.calls.value.withLock { $0 } < rounds ? .required : .disallowed)
                .maximumResponseTokens(30)
        }
    }

    /// `.required`, as Apple documents it: the session keeps calling tools until the mode changes
    /// (past the round limit `.allowed` has), a tool throws, or the next round no longer fits.
    @Test func toolCallingMode_requiredCallsEveryRoundAndDisallowedNever() async throws {
        let rounds = LanguageModelSession.maximumToolRounds + 2
        let counted = WeatherTool()
        let switching = try await LanguageModelSession(profile: RequiredRounds(tool: counted, rounds: rounds)).respond(to: "Weather?")
        let calls: [String] = (0 ..< rounds).flatMap { _ in ["toolCalls", "toolOutput"] }
        #expect(switching.transcriptEntries.map(\.kind) == ["prompt"] + calls + ["response"])
        #expect(counted.calls.value.withLock { $0 } == rounds)
        let tool = WeatherTool()
        let session = LanguageModelSession(model: tinyModel, tools: [tool], instructions: Self.instructions)
        // Disallowed: even a model steered straight at the call marker cannot open a call.
        let renderer = PromptRenderer(tokenizer: tokenizer)
        session.setTokenSteering { _ in renderer.toolCall! }
        let plain = try await session.respond(to: "Again?", options: GenerationOptions(maximumResponseTokens: 6, toolCallingMode: .disallowed))
        #expect(plain.transcriptEntries.map(\.kind) == ["prompt", "response"])
        guard case let .response(r) = plain.transcriptEntries.last else { return }
        #expect(!r.tokenIDs.contains(renderer.toolCall!))
        #expect(tool.calls.value.withLock { $0 } == 0)
        try await session.expectCacheExact()
        let none = LanguageModelSession(model: tinyModel)
        await #expect(throws: LanguageModelError.invalidOptions(option: "toolCallingMode", reason: ".required needs at least one tool")) {
            try await none.respond(to: "x", options: GenerationOptions(toolCallingMode: .required))
        }
        // A budget that cannot finish the shortest call is refused before anything is computed.
        let before = session.transcript
        do {
            _ = try await session.respond(to: "Weather?", options: GenerationOptions(maximumResponseTokens: 8, toolCallingMode: .required))
            Issue.record("a required call was accepted with 8 tokens")
        } catch let LanguageModelError.invalidOptions(option, reason) {
            #expect(option == "maximumResponseTokens" && reason.hasPrefix("8 cannot hold the shortest tool call"), "\(reason)")
        }
        #expect(session.transcript == before)
        #expect(tool.calls.value.withLock { $0 } == 0)
        // Required in the request's options: nothing changes the mode, so the rounds go on until
        // the next one does not fit; the transcript keeps the prompt and every round (the policy).
        let endless = WeatherTool()
        let full = LanguageModelSession(model: tinyModel, tools: [endless], instructions: Self.instructions)
        do {
            _ = try await full.respond(to: "Weather?", options: GenerationOptions(maximumResponseTokens: 30, toolCallingMode: .required))
            Issue.record("a request that must call tools answered")
        } catch let LanguageModelError.contextSizeExceeded(e) {
            #expect(e.tokenCount > e.contextSize && e.responseBudget == 30, "\(e)")
        }
        let made = endless.calls.value.withLock { $0 }
        #expect(made > rounds)
        #expect(full.transcript.history.map(\.kind) == ["prompt"] + (0 ..< made).flatMap { _ in ["toolCalls", "toolOutput"] })
        try await full.expectCacheExact()
    }

    /// A stream through more tool rounds than `.allowed` would take (required, then disallowed by
    /// the profile): its snapshots are the answer's alone, and the last is `respond`'s answer.
    @Test func streamResponse_acrossRequiredToolRoundsEndsWithRespondsAnswer() async throws {
        let rounds = LanguageModelSession.maximumToolRounds + 1
        let streamed = WeatherTool(), answered = WeatherTool()
        let stream = LanguageModelSession(profile: RequiredRounds(tool: streamed, rounds: rounds)).streamResponse(to: "Weather?")
        var snapshots: [String] = []
        for try await snapshot in stream { snapshots.append(snapshot.content) }
        let final = try await stream.collect()
        let response = try await LanguageModelSession(profile: RequiredRounds(tool: answered, rounds: rounds)).respond(to: "Weather?")
        #expect(streamed.calls.value.withLock { $0 } == rounds && answered.calls.value.withLock { $0 } == rounds)
        let calls: [String] = (0 ..< rounds).flatMap { _ in ["toolCalls", "toolOutput"] }
        #expect(final.transcriptEntries.map(\.kind) == ["prompt"] + calls + ["response"])
        #expect(Array(final.transcriptEntries) == Array(response.transcriptEntries))
        #expect(!snapshots.isEmpty && snapshots.last == response.content && final.content == response.content)
        for (a, b) in zip(snapshots, snapshots.dropFirst()) { #expect(b.count >= a.count) }
    }

    /// A tool's output can make the next round longer than the window: the request throws
    /// `contextSizeExceeded` with the counts (not a runtime refusal), the transcript keeps the
    /// prompt and the round so far or nothing, as the policy says, and the session stays usable
    /// (found by the `generation-schema` fuzz target).
    @Test(arguments: [LanguageModelSession.TranscriptErrorHandlingPolicy.preserveTranscript, .revertTranscript])
    func toolRound_outgrowingTheWindow_throwsContextSizeExceeded(policy: LanguageModelSession.TranscriptErrorHandlingPolicy) async throws {
        struct VerboseTool: Tool {
            let calls = WeatherTool.Counter()
            var name: String { "weather" }
            var description: String { "Current weather for a city." }
            func call(arguments: WeatherQuery) async throws -> String {
                let first = calls.value.withLock { $0 += 1; return $0 == 1 }
                return first ? String(repeating: "Sunny and warm all day long. ", count: 200) : "Sunny."
            }
        }
        let tool = VerboseTool()
        let session = LanguageModelSession(model: tinyModel, tools: [tool], instructions: Self.instructions)
        session.transcriptErrorHandlingPolicy = policy
        let before = session.transcript
        do {
            _ = try await session.respond(to: "Weather?", options: GenerationOptions(maximumResponseTokens: 30, toolCallingMode: .required))
            Issue.record("a round longer than the window was run")
        } catch let LanguageModelError.contextSizeExceeded(e) {
            #expect(e.contextSize == 1024 && e.responseBudget == 30 && e.tokenCount == e.promptTokenCount + 30 && e.tokenCount > 1024, "\(e)")
        }
        #expect(tool.calls.value.withLock { $0 } == 1)
        let added = Array(session.transcript.entries.dropFirst(before.count))
        #expect(Array(session.transcript.entries.prefix(before.count)) == before.entries)
        #expect(added.map(\.kind) == (policy == .preserveTranscript ? ["prompt", "toolCalls", "toolOutput"] : []))
        try await session.expectCacheExact()
        if policy == .revertTranscript {
            let next = try await session.respond(to: "Thanks.", options: GenerationOptions(maximumResponseTokens: 4, toolCallingMode: .disallowed))
            #expect(next.transcriptEntries.map(\.kind) == ["prompt", "response"])
            try await session.expectCacheExact()
        }
    }

    @Test func respondGenerating_withToolsCallsThemBeforeTheValue() async throws {
        let tool = WeatherTool()
        let rounds = LanguageModelSession.maximumToolRounds + 1
        let session = LanguageModelSession(profile: RequiredRounds(tool: tool, rounds: rounds))
        let response = try await session.respond(to: "Plan my day.", generating: DayQuery.self)
        let calls: [String] = (0 ..< rounds).flatMap { _ in ["toolCalls", "toolOutput"] }
        #expect(response.transcriptEntries.map(\.kind) == ["prompt"] + calls + ["response"])
        #expect(tool.calls.value.withLock { $0 } == rounds)
        guard case let .response(r) = response.transcriptEntries.last else { return }
        #expect(r.structure?.source == "DayQuery")
        #expect(try DayQuery(r.structure!.content).day == response.content.day)
        #expect(!r.tokenIDs.contains(PromptRenderer(tokenizer: tokenizer).toolCall!))
        try await session.expectCacheExact()
    }

    @Test func respondGenerating_aCallCannotOpenOnceTheValueHasStarted() async throws {
        let tool = WeatherTool()
        let session = LanguageModelSession(model: tinyModel, tools: [tool], instructions: Self.instructions)
        let open = PromptRenderer(tokenizer: tokenizer).toolCall!
        session.setTokenSteering { generated in generated.isEmpty ? nil : open }   // after the value's first token
        let response = try await session.respond(to: "Plan my day.", generating: DayQuery.self, options: short(30))
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "response"])
        guard case let .response(r) = response.transcriptEntries.last else { return }
        #expect(!r.tokenIDs.contains(open))
        _ = try DayQuery(r.structure!.content)
        #expect(tool.calls.value.withLock { $0 } == 0)
        try await session.expectCacheExact()
    }

    /// Under `.allowed` (the default) a model that calls again and again is stopped by the round
    /// limit: the round after it offers no call, so its response is the answer.
    @Test func toolCallingModeAllowed_theRoundAfterTheLimitOffersNoCall() async throws {
        let open = PromptRenderer(tokenizer: tokenizer).toolCall!
        for guided in [false, true] {
            let tool = WeatherTool()
            let session = LanguageModelSession(model: tinyModel, tools: [tool], instructions: Self.instructions)
            session.setTokenSteering { generated in generated.isEmpty ? open : nil }   // every round opens with a call, if it may
            let entries = guided
                ? try await session.respond(to: "Plan my day.", generating: DayQuery.self, options: short(30)).transcriptEntries
                : try await session.respond(to: "Weather?", options: short(30)).transcriptEntries
            let rounds = LanguageModelSession.maximumToolRounds
            let calls: [String] = (0 ..< rounds).flatMap { _ in ["toolCalls", "toolOutput"] }
            #expect(entries.map(\.kind) == ["prompt"] + calls + ["response"])
            #expect(tool.calls.value.withLock { $0 } == rounds)
            guard case let .response(r) = entries.last else { return }
            #expect(!r.tokenIDs.isEmpty && !r.tokenIDs.contains(open), "guided: \(guided)")
            if guided { _ = try DayQuery(r.structure!.content) }
            try await session.expectCacheExact()
        }
    }

    @Test func toolCalling_aThrowingToolStopsTheRequestWithToolCallError() async throws {
        struct Broken: Error, Equatable {}
        struct FailingTool: Tool {
            var description: String { "Always fails." }
            func call(arguments: NoArguments) async throws -> String { throw Broken() }
        }
        let session = LanguageModelSession(model: tinyModel, tools: [FailingTool()], instructions: Self.instructions)
        do {
            _ = try await session.respond(to: "Try it.", options: GenerationOptions(maximumResponseTokens: 20, toolCallingMode: .required))
            Issue.record("no error")
        } catch let error as LanguageModelSession.ToolCallError {
            #expect(error.tool.name == "FailingTool")
            #expect(error.underlyingError as? Broken == Broken())
        }
        #expect(session.transcript.history.isEmpty && !session.isResponding)
        try await session.expectCacheExact()
    }

    @Test func toolCalling_withoutToolsTheCallSyntaxIsPlainResponseText() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let renderer = PromptRenderer(tokenizer: tokenizer)
        let call = [renderer.toolCall!] + tokenizer.encode("teleport Mars", bos: false)
        session.setTokenSteering { generated in generated.count < call.count ? call[generated.count] : nil }
        let response = try await session.respond(to: "Beam me up.", options: short(call.count))
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "response"])
        guard case let .response(r) = response.transcriptEntries.last else { return }
        #expect(r.tokenIDs == call)   // an unfinished call within the budget stays in the response
        try await session.expectCacheExact()
    }
}
