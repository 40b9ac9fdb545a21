import Foundation
@testable import LMRuntime
@testable import LMSession
import LMTestSupport
import Synchronization
import Testing

/// `ContextOptions.reasoningLevel`: the model reasons between `<think>` and `</think>` at the start
/// of its turn, the response (or a call) continues that turn, the reasoning is a transcript entry,
/// and later requests leave it out as reasoning models' templates do, so the turn after it
/// recomputes the response that followed it.
struct ReasoningTests {
    static let renderer = PromptRenderer(tokenizer: tokenizer)

    /// Steers one run after another: `runs[0]` in the first, `runs[1]` in the next, and so on
    /// (a run starts when nothing has been generated in it yet).
    static func steer(_ session: LanguageModelSession, _ runs: [[Int]]) {
        let script = Mutex((run: -1, step: 0))
        session.setTokenSteering { generated in
            script.withLock { s in
                if generated.isEmpty { s = (s.run + 1, 0) }
                defer { s.step += 1 }
                guard s.run < runs.count, s.step < runs[s.run].count else { return nil }
                return runs[s.run][s.step]
            }
        }
    }

    static func text(_ s: String) -> [Int] { tokenizer.encode(s, bos: false) }

    /// FoundationModels' iOS 27 shape (`init(id:metadata:segments:signature:)`, `description`), and
    /// entries saved before `metadata` and `signature` existed.
    @Test func reasoning_hasTheIOS27ShapeAndReadsEntriesSavedBeforeIt() throws {
        let reasoning = Transcript.Reasoning(metadata: ["source": "plan"], segments: [.text(.init(content: "pace first"))],
                                             signature: Data([1, 2, 3]))
        #expect(reasoning.description == "pace first" && reasoning.metadata == ["source": "plan".generatedContent])
        let saved = try JSONEncoder().encode(reasoning)
        let again = try JSONDecoder().decode(Transcript.Reasoning.self, from: saved)
        #expect(again == reasoning && again.id == reasoning.id && again.signature == Data([1, 2, 3]))
        var old = try #require(try JSONSerialization.jsonObject(with: saved) as? [String: Any])
        old["metadata"] = nil
        old["signature"] = nil
        let before = try JSONDecoder().decode(Transcript.Reasoning.self, from: JSONSerialization.data(withJSONObject: old))
        #expect(before.id == reasoning.id && before.segments == reasoning.segments && before.metadata.isEmpty && before.signature == nil)
    }

    /// A saved conversation with reasoning (`Fuzz/corpus/transcript/reasoning.json`: a signature,
    /// no metadata, no ids) loads, and a session on it renders nothing of the reasoning.
    @Test func transcript_savedWithReasoningLoadsAndRendersWithoutIt() async throws {
        let url = Fixtures.packageRoot.appendingPathComponent("Fuzz/corpus/transcript/reasoning.json")
        let transcript = try JSONDecoder().decode(Transcript.self, from: Data(contentsOf: url))
        guard case let .reasoning(reasoning) = transcript.history.dropFirst().first else { Issue.record("no reasoning"); return }
        #expect(reasoning.description == "pace first" && reasoning.signature == Data([1, 2, 3]) && reasoning.metadata.isEmpty)
        let restored = LanguageModelSession(model: tinyModel, transcript: transcript)
        let without = Transcript(entries: transcript.entries.filter { $0.kind != "reasoning" })
        let plain = LanguageModelSession(model: tinyModel, transcript: without)
        let a = try await restored.respond(to: "And after?", options: short(2))
        let b = try await plain.respond(to: "And after?", options: short(2))
        #expect(a.usage.input.totalTokenCount == b.usage.input.totalTokenCount)
        #expect(try await restored.cachedTokens == plain.cachedTokens)
    }

    @Test func respond_reasonsFirstThenAnswersInTheSameTurn() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        let thought = Self.text("pace first"), answer = Self.text("Run easy.")
        Self.steer(session, [thought, answer + [Self.renderer.end]])
        let response = try await session.respond(to: "Tomorrow?", options: short(20),
                                                 contextOptions: ContextOptions(reasoningLevel: .custom("\(thought.count)")))
        #expect(response.content == "Run easy.")
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "reasoning", "response"])
        guard case let .reasoning(reasoning) = response.transcriptEntries.dropFirst().first else { Issue.record("no reasoning"); return }
        #expect(reasoning.segments.map(\.text) == ["pace first"])
        #expect(response.usage.output.reasoningTokenCount == thought.count)
        #expect(response.usage.output.totalTokenCount == thought.count + answer.count)
        #expect(session.transcript.history.map(\.kind) == ["prompt", "reasoning", "response"])
        // One assistant turn: its header, the reasoning in its markers, the answer, the close.
        let held = try await session.cachedTokens
        let turn = Self.renderer.assistant + Self.renderer.reasoningOpen + thought + Self.renderer.reasoningClose + answer + Self.renderer.close
        #expect(Array(held.suffix(turn.count)) == turn)
        #expect(Self.renderer.reasoningOpen == tokenizer.encode(continuing: "<think>\n") && Self.renderer.reasoningEnd == nil)
        try await session.expectCacheExact()
    }

    @Test func respond_theTurnAfterReasoningRecomputesTheResponseThatFollowedIt() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        let thought = Self.text("pace first"), answer = Self.text("Run easy.")
        Self.steer(session, [thought, answer + [Self.renderer.end]])
        _ = try await session.respond(to: "Tomorrow?", options: short(20), contextOptions: ContextOptions(reasoningLevel: .custom("3")))
        let held = try await session.cachedTokens
        // Where the reasoning began: right after the turn's header.
        let reasoningStart = try #require(held.indices.last { held[$0...].starts(with: Self.renderer.reasoningOpen) })
        #expect(held[reasoningStart - 1] == Self.renderer.assistant.last)
        session.setTokenSteering(nil)
        let next = try await session.respond(to: "And after?", options: short(4))
        let report = try #require(next.invalidation)
        #expect(report.reason == .prefixChanged && report.position == reasoningStart)
        guard case let .transcriptEntry(_, kind) = report.segment else { Issue.record("\(report.segment)"); return }
        #expect(kind == "response")   // the response that followed the reasoning moved up
        #expect(next.usage.input.cachedTokenCount == reasoningStart)
        #expect(report.discardedTokenCount == held.count - reasoningStart)
        try await session.expectCacheExact()
        // Without reasoning, the turn after keeps everything.
        let plain = try await session.respond(to: "Thanks.", options: short(4))
        #expect(plain.invalidation == nil)
    }

    /// `prewarm()` after a reasoned turn recomputes that turn's response without the reasoning
    /// ahead of time: the next request then only appends.
    @Test func prewarm_afterAReasonedTurnRecomputesItsResponseAhead() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        let thought = Self.text("pace first"), answer = Self.text("Run easy.")
        Self.steer(session, [thought, answer + [Self.renderer.end]])
        _ = try await session.respond(to: "Tomorrow?", options: short(20), contextOptions: ContextOptions(reasoningLevel: .custom("3")))
        session.setTokenSteering(nil)
        session.prewarm()
        let next = try await session.respond(to: "And after?", options: short(4))
        #expect(next.invalidation == nil)
        let prompt = Self.renderer.user.count + Self.text("And after?").count + Self.renderer.close.count + Self.renderer.assistant.count
        #expect(next.usage.input.totalTokenCount - next.usage.input.cachedTokenCount == prompt)
        try await session.expectCacheExact()
    }

    /// The shared prefix store keeps a reasoned turn only up to its prompt: later requests render
    /// it without the reasoning, so the rows after would serve no one. A turn without reasoning is
    /// kept whole.
    @Test func respond_aReasonedTurnIsSharedOnlyUpToItsPrompt() async throws {
        let model = SystemLanguageModel(named: "tiny", prefixStore: .memoryOnly(memoryByteLimit: 64 << 20))
        let loaded = try model.loaded()
        func stored(_ tokens: [Int], _ boundaries: [Int]) -> Int {
            let cache = Transformer(weights: loaded.weights).makeCache()
            return loaded.prefixStore.restore(into: cache, tokens: tokens, boundaries: boundaries).total
        }
        for reasons in [true, false] {
            let session = LanguageModelSession(model: model, instructions: "Plan a run, \(reasons).")
            let response = try await session.respond(to: "Tomorrow?", options: short(6),
                                                     contextOptions: ContextOptions(reasoningLevel: reasons ? .custom("4") : nil))
            let held = try await session.cachedTokens
            if reasons {
                let start = try #require(held.indices.last { held[$0...].starts(with: Self.renderer.reasoningOpen) })
                let promptEnd = start - Self.renderer.assistant.count
                #expect(response.transcriptEntries.map(\.kind) == ["prompt", "reasoning", "response"])
                #expect(stored(held, [promptEnd, held.count]) == promptEnd)
            } else {
                #expect(stored(held, [held.count]) == held.count)
            }
        }
    }

    @Test func respond_aVocabularyWithThinkTokensStopsReasoningAtItsClose() async throws {
        let vocabulary = try chatMLVocabulary(adding: ["<think>", "</think>"])
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: vocabulary.vocabSize, contextLength: 512))
        let model = SystemLanguageModel(try LoadedModel(weights: weights, tokenizer: vocabulary, prefixStore: .memoryOnly(memoryByteLimit: 0)))
        let renderer = PromptRenderer(tokenizer: vocabulary)
        let think = try #require(vocabulary.id(of: "<think>")), done = try #require(vocabulary.id(of: "</think>"))
        #expect(renderer.reasoningOpen.first == think && renderer.reasoningClose.first == done && renderer.reasoningEnd == done)
        #expect(vocabulary.encode("<think>", bos: false) == [think])   // read from text as the model writes it
        let session = LanguageModelSession(model: model, instructions: "Plan a run.")
        let thought = vocabulary.encode("pace first", bos: false), answer = vocabulary.encode("Run easy.", bos: false)
        Self.steer(session, [thought + [done], answer + [renderer.end]])
        let response = try await session.respond(to: "Tomorrow?", options: short(20), contextOptions: ContextOptions(reasoningLevel: .moderate))
        #expect(response.usage.output.reasoningTokenCount == thought.count)   // ended by `</think>`, far from 256
        #expect(response.content == "Run easy.")
        let held = try await session.cachedTokens
        let turn = renderer.assistant + [think] + vocabulary.encode("\n", bos: false) + thought + [done]
            + vocabulary.encode("\n\n", bos: false) + answer + renderer.close
        #expect(Array(held.suffix(turn.count)) == turn)
        try await session.expectCacheExact()
    }

    /// A call continues the turn the reasoning opened; after the tool's output the model reasons
    /// again before it answers (as reasoning models do inside a turn).
    @Test func respond_aCallAfterReasoningContinuesItsTurnAndTheNextRoundReasonsAgain() async throws {
        let tool = WeatherTool()
        let session = LanguageModelSession(model: tinyModel, tools: [tool], instructions: "Plan a run.")
        let thought = Self.text("check weather"), again = Array(Self.text("sunny then, so go early").prefix(thought.count))
        let call = [Self.renderer.toolCall!] + Self.text(#"weather {"city":"Lisbon"}"#) + [Self.renderer.end]
        let answer = Self.text("Run at dawn.")
        Self.steer(session, [thought, call, again, answer + [Self.renderer.end]])
        let level = ContextOptions(reasoningLevel: .custom("\(thought.count)"))   // both run to this budget
        let response = try await session.respond(to: "Tomorrow in Lisbon?", options: short(30), contextOptions: level)
        #expect(tool.calls.value.withLock { $0 } == 1 && response.content == "Run at dawn.")
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "reasoning", "toolCalls", "toolOutput", "reasoning", "response"])
        let reasonings = response.transcriptEntries.compactMap { if case let .reasoning(r) = $0 { r.description } else { nil } }
        #expect(reasonings == ["check weather", tokenizer.decode(again).trimmingCharacters(in: .whitespaces)])
        #expect(response.usage.output.reasoningTokenCount == thought.count + again.count)
        // The call follows the reasoning's close with no second header, as it was generated; so
        // does the answer after the second reasoning.
        let held = try await session.cachedTokens
        let first = Self.renderer.assistant + Self.renderer.reasoningOpen + thought + Self.renderer.reasoningClose + call
        let second = Self.renderer.assistant + Self.renderer.reasoningOpen + again + Self.renderer.reasoningClose + answer + Self.renderer.close
        #expect(held.indices.contains { held[$0...].starts(with: first) })
        #expect(Array(held.suffix(second.count)) == second)
        try await session.expectCacheExact()
    }

    @Test func respond_aValueAfterReasoningFollowsTheSchema() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        let thought = Self.text("a day")
        Self.steer(session, [thought])   // the value is the model's own, under the grammar
        let response = try await session.respond(to: "Which day?", generating: DayQuery.self, options: short(40),
                                                 contextOptions: ContextOptions(reasoningLevel: .custom("\(thought.count)")))
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "reasoning", "response"])
        #expect(response.usage.output.reasoningTokenCount == thought.count)
        _ = try DayQuery(response.rawContent)
        try await session.expectCacheExact()
    }

    @Test func respond_theProfilesLevelAndHookAndTheRequestsLevelFirst() async throws {
        struct Reasoned: LanguageModelSession.DynamicProfile {
            let hooks: Locked<Int>
            var body: some LanguageModelSession.DynamicProfile {
                LanguageModelSession.Profile { Instructions("Plan a run.") }
                    .model(tinyModel)
                    .reasoningLevel(.custom("4"))
                    .onReasoning { hooks.withLock { $0 += 1 } }
            }
        }
        let profile = Reasoned(hooks: Locked(0))
        let session = LanguageModelSession(profile: profile)
        let first = try await session.respond(to: "Tomorrow?", options: short(3))
        #expect(first.usage.output.reasoningTokenCount <= 4 && first.transcriptEntries.map(\.kind) == ["prompt", "reasoning", "response"])
        #expect(profile.hooks.withLock { $0 } == 1)
        let second = try await session.respond(to: "After?", options: short(3), contextOptions: ContextOptions(reasoningLevel: .custom("2")))
        #expect(second.usage.output.reasoningTokenCount <= 2 && profile.hooks.withLock { $0 } == 2)
        try await session.expectCacheExact()
    }

    @Test func respond_aCustomLevelThatIsNoNumberIsRefusedBeforeAnything() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        await #expect {
            try await session.respond(to: "Tomorrow?", options: short(), contextOptions: ContextOptions(reasoningLevel: .custom("lots")))
        } throws: { error in
            guard case let LanguageModelError.invalidOptions(option, reason) = error else { return false }
            return option == "reasoningLevel" && reason.contains("lots")
        }
        #expect(session.transcript.history.isEmpty && session.usage.input.totalTokenCount == 0)
        #expect(try await session.cachedTokens.isEmpty)
    }

    @Test func respond_reasoningFitsWhatTheWindowLeaves() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        let window = tinyModel.contextSize
        let response = try await session.respond(to: "Tomorrow?", options: short(4), contextOptions: ContextOptions(reasoningLevel: .custom("1000000")))
        // The first run's input is the request with the reasoning opened.
        let request = response.usage.input.totalTokenCount - Self.renderer.reasoningOpen.count
        let markers = Self.renderer.reasoningOpen.count + Self.renderer.reasoningClose.count
        #expect(response.usage.output.reasoningTokenCount > 0)
        #expect(response.usage.output.reasoningTokenCount <= window - request - 4 - markers)
        try await session.expectCacheExact()
    }

    /// A response budget that leaves the window no room for reasoning: the request is answered
    /// without it.
    @Test func respond_withNoRoomLeftAnswersWithoutReasoning() async throws {
        let probe = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        let request = try await probe.respond(to: "Tomorrow?", options: short(1)).usage.input.totalTokenCount
        let session = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        let budget = tinyModel.contextSize - request - Self.renderer.reasoningOpen.count - Self.renderer.reasoningClose.count
        let response = try await session.respond(to: "Tomorrow?", options: short(budget), contextOptions: ContextOptions(reasoningLevel: .deep))
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "response"] && response.usage.output.reasoningTokenCount == 0)
        // One token less for the response leaves one for reasoning.
        let fresh = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        let one = try await fresh.respond(to: "Tomorrow?", options: short(budget - 1), contextOptions: ContextOptions(reasoningLevel: .deep))
        #expect(one.transcriptEntries.map(\.kind) == ["prompt", "reasoning", "response"] && one.usage.output.reasoningTokenCount <= 1)
    }

    @Test func streamResponse_snapshotsShowTheResponseNotTheReasoning() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: "Plan a run.")
        let thought = Self.text("secret plan"), answer = Self.text("Run easy.")
        Self.steer(session, [thought, answer + [Self.renderer.end]])
        let stream = session.streamResponse(to: "Tomorrow?", options: short(20),
                                            contextOptions: ContextOptions(reasoningLevel: .custom("\(thought.count)")))
        var seen: [String] = []
        for try await snapshot in stream { seen.append(snapshot.content) }
        let response = try await stream.collect()
        #expect(response.content == "Run easy." && !seen.isEmpty)
        #expect(seen.allSatisfy { "Run easy.".hasPrefix($0) })
        #expect(response.transcriptEntries.map(\.kind) == ["prompt", "reasoning", "response"])
    }
}
