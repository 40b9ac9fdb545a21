import Foundation
@testable import LMSession
import LMRuntime
import LMTestSupport
import Testing

/// Stateless transforms change what the model sees; stateful ones (onResponse + @SessionProperty) change the transcript.
struct HistoryTransformTests {
    static let instructions = "You are a cooking assistant. Be concise."

    static func stripDebug(_ entries: [Transcript.Entry]) -> [Transcript.Entry] {
        entries.map { entry in
            guard case let .prompt(p) = entry, let cut = p.text.range(of: " [debug") else { return entry }
            return .prompt(.init(text: String(p.text[..<cut.lowerBound])))
        }
    }

    @Test func historyTransform_inPlaceStripKeepsFullReuseAfterTheFirstTurn() async throws {
        let profile = LanguageModelSession.Profile { Instructions(Self.instructions) }
            .historyTransform(Self.stripDebug)
        let stripped = LanguageModelSession(profile: profile.model(tinyModel))
        var previous: LanguageModelSession.Response<String>?
        for turn in 0 ..< 4 {
            let response = try await stripped.respond(to: "Dinner idea \(turn) [debug request=\(turn * 17) build=42]", options: short())
            if let previous {
                #expect(response.invalidation == nil)
                #expect(response.usage.input.cachedTokenCount
                    == previous.usage.input.totalTokenCount + previous.usage.output.totalTokenCount + 1)
                #expect(response.usage.input.totalTokenCount - response.usage.input.cachedTokenCount
                    == Count.prompt("Dinner idea \(turn)") + 1)
            }
            previous = response
        }
        // The stored transcript keeps what the user sent.
        guard case let .prompt(first) = stripped.transcript.history.first else { Issue.record("no prompt"); return }
        #expect(first.text.contains("[debug request=0"))
        try await stripped.expectCacheExact()
    }

    @Test func historyTransform_truncationMovesTheBoundaryToTheFirstDroppedEntry() async throws {
        let keep = 4   // entries: the last two turns, then the new prompt is appended
        let profile = LanguageModelSession.Profile { Instructions(Self.instructions) }
            .historyTransform { Array($0.suffix(keep + 1)) }
            .model(tinyModel)
        let session = LanguageModelSession(profile: profile)
        let instructionTokens = Count.instructions([Self.instructions])
        for turn in 0 ..< 5 {
            let response = try await session.respond(to: "Question \(turn)?", options: short())
            if turn >= 3 {
                // The oldest visible turn was dropped: the first entry is now the next turn's prompt,
                // so reuse ends at the first token where the two prompts differ.
                let dropped = tokenizer.encode("Question \(turn - 3)?", bos: false)
                let first = tokenizer.encode("Question \(turn - 2)?", bos: false)
                let boundary = instructionTokens + 1 + zip(dropped, first).prefix { $0 == $1 }.count
                #expect(response.usage.input.cachedTokenCount == boundary)
                #expect(response.invalidation?.position == boundary)
                #expect(response.invalidation?.segment == .transcriptEntry(index: 0, kind: "prompt"))
            } else if turn > 0 {
                #expect(response.invalidation == nil)
            }
            try await session.expectCacheExact()
        }
        #expect(session.transcript.history.count == 10)   // stored history is untouched
    }

    struct CompressingProfile: LanguageModelSession.DynamicProfile {
        @LanguageModelSession.SessionProperty(\.history) var history
        let limit: Int
        let keep: Int

        var body: some LanguageModelSession.DynamicProfile {
            LanguageModelSession.Profile { Instructions(HistoryTransformTests.instructions) }
                .model(tinyModel)
                .onResponse {
                    if history.count > limit { history = Array(history.suffix(keep)) }
                }
        }
    }

    @Test func onResponse_sessionPropertyCompressionChangesTheStoredTranscript() async throws {
        let session = LanguageModelSession(profile: CompressingProfile(limit: 4, keep: 2))
        var responses: [LanguageModelSession.Response<String>] = []
        for turn in 0 ..< 4 { responses.append(try await session.respond(to: "Turn \(turn).", options: short())) }
        // After turn 2 the history had 6 entries > 4: it was cut to the last 2 (turn 2's prompt and response).
        let history = session.transcript.history
        #expect(history.count == 4)   // turn 2 kept, then turn 3 was added (4 is not > 4)
        #expect(history.first == responses[2].transcriptEntries.first)
        // Turn 3 recomputed from the first changed entry: entry 0, which used to be turn 0's prompt.
        #expect(responses[3].invalidation?.segment == .transcriptEntry(index: 0, kind: "prompt"))
        let same = zip(tokenizer.encode("Turn 0.", bos: false), tokenizer.encode("Turn 2.", bos: false)).prefix { $0 == $1 }.count
        #expect(responses[3].usage.input.cachedTokenCount == Count.instructions([Self.instructions]) + 1 + same)
        try await session.expectCacheExact()
    }

    @Test func sessionProperty_outsideARequestReadsEmptyAndIgnoresWrites() {
        let profile = CompressingProfile(limit: 1, keep: 1)
        #expect(profile.history.isEmpty)
        profile.history = [.prompt(.init(text: "x"))]
        #expect(profile.history.isEmpty)
    }
}
