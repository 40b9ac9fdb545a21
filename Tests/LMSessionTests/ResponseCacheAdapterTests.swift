import Foundation
@testable import LMSession
import LMTestSupport
import ResponseCache
import Testing

struct ResponseCacheAdapterTests {
    static let instructions = "You summarise a runner's week in two sentences."

    @Test func respond_cacheHitSkipsGenerationAndStillRecordsTheTurn() async throws {
        let cache = ResponseCache<CachedResponse>()
        let first = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let generated = try await first.respond(to: "Summarise week 47.", options: short(), cache: cache, dataFingerprint: "w47")
        #expect(generated.origin == .generated && first.usage.output.totalTokenCount == 6)
        let second = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let hit = try await second.respond(to: "Summarise week 47.", options: short(), cache: cache, dataFingerprint: "w47")
        #expect(hit.origin == .memory && hit.value == generated.value)
        #expect(second.usage.output.totalTokenCount == 0)              // the model never ran
        #expect(second.transcript.history.map(\.kind) == ["prompt", "response"])
        // Changed data, instructions or options give another key.
        let other = try await second.respond(to: "Summarise week 47.", options: short(), cache: cache, dataFingerprint: "w48")
        #expect(other.origin == .generated)
        let third = LanguageModelSession(model: tinyModel, instructions: "Something else.")
        #expect(try await third.cacheKey(for: "Summarise week 47.", options: short(), dataFingerprint: "w47")
            != first.cacheKey(for: "Summarise week 47.", options: short(), dataFingerprint: "w47"))
        #expect(try await first.cacheKey(for: "x", options: short(5)) != first.cacheKey(for: "x", options: short(6)))
    }

    @Test func cacheKey_isStableForTheSameRenderedRequest() async throws {
        let a = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let b = LanguageModelSession(model: tinyModel, instructions: Self.instructions)
        let ka = try await a.cacheKey(for: "Hello", options: short(), tags: ["home"])
        let kb = try await b.cacheKey(for: "Hello", options: short())
        #expect(ka == kb && ka.tags == ["home"])
    }

    /// A profile that reasons answers otherwise: its level is part of the key.
    @Test func cacheKey_differsWithTheProfilesReasoningLevel() async throws {
        func session(_ level: ContextOptions.ReasoningLevel?) -> LanguageModelSession {
            LanguageModelSession(profile: LanguageModelSession.Profile { Instructions(Self.instructions) }
                .model(tinyModel).reasoningLevel(level))
        }
        let none = try await session(nil).cacheKey(for: "Hello", options: short())
        let light = try await session(.light).cacheKey(for: "Hello", options: short())
        let deep = try await session(.deep).cacheKey(for: "Hello", options: short())
        #expect(Set([none, light, deep]).count == 3)
        #expect(try await session(.light).cacheKey(for: "Hello", options: short()) == light)
        #expect(none == (try await LanguageModelSession(model: tinyModel, instructions: Self.instructions).cacheKey(for: "Hello", options: short())))
    }
}
