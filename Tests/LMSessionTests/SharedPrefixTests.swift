import Foundation
@testable import LMSession
import LMRuntime
import LMTestSupport
import Testing

/// Sessions sharing K/V through their model's prefix store, in one process and across a relaunch.
/// Each test makes a model of its own (same weights), so no other test's sessions are seen.
struct SharedPrefixTests {
    static let instructions = "You are a running coach. Give one short, specific focus for the next run."

    static func model(_ store: PrefixStore.Configuration = .memoryOnly()) throws -> SystemLanguageModel {
        let tiny = try tinyModel.loaded()
        return SystemLanguageModel(try LoadedModel(weights: tiny.weights, tokenizer: tiny.tokenizer, prefixStore: store))
    }

    /// The store restores another session's rows as far as the tokens agree: the instructions,
    /// then the `<|user|>` marker and the words the prompts share, up to where they differ.
    @Test func firstRequest_ofANewSessionRestoresWhatAnotherComputedUpToTheFirstDifference() async throws {
        let model = try Self.model()
        let prompts = ["Focus for error type 1?", "Focus for error type 2?", "Why do my calves hurt?", "Focus for pacing?"]
        let first = LanguageModelSession(model: model, instructions: Self.instructions)
        let a = try await first.respond(to: prompts[0], options: short())
        #expect(a.usage.input.cachedTokenCount == 0)
        let instructions = Count.instructions([Self.instructions])
        for (i, prompt) in prompts.enumerated().dropFirst() {
            let words = tokenizer.encode(prompt, bos: false)
            let shared = prompts[..<i].map { zip(words, tokenizer.encode($0, bos: false)).prefix { $0 == $1 }.count }.max() ?? 0
            let expected = instructions + 1 + shared   // a prompt never holds all of another here
            let session = LanguageModelSession(model: model, instructions: Self.instructions)
            let r = try await session.respond(to: prompt, options: short())
            #expect(r.usage.input.cachedTokenCount == expected, "\(prompt)")
            #expect(r.usage.input.cachedFromSharedStoreCount == expected && r.usage.input.cachedFromSessionCount == 0)
            #expect(r.usage.computedTokenCount == r.usage.input.totalTokenCount - expected)
            #expect(r.invalidation?.reason == .emptyCache && r.invalidation?.recomputedFrom == expected)
            try await session.expectCacheExact()
        }
        let store = try model.loaded().prefixStore
        #expect(store.statistics.partialHits == prompts.count - 1)   // each ended inside an earlier turn's entry
        #expect(store.checkInvariants() == nil && store.statistics.readerCount == 0)
    }

    /// Two screens whose instructions differ only in their last sentence (a date): the second
    /// session's first request restores every row above the difference.
    @Test func firstRequest_withInstructionsThatDifferAtTheEndRestoresEveryRowAboveTheDifference() async throws {
        let model = try Self.model()
        let (mondayText, tuesdayText) = (Self.instructions + " Today is Monday.", Self.instructions + " Today is Tuesday.")
        let monday = LanguageModelSession(model: model, instructions: mondayText)
        _ = try await monday.respond(to: "Plan my run.", options: short())
        let tuesday = LanguageModelSession(model: model, instructions: tuesdayText)
        let r = try await tuesday.respond(to: "Plan my run.", options: short())
        let agreeing = zip(tokenizer.encode(mondayText, bos: false), tokenizer.encode(tuesdayText, bos: false)).prefix { $0 == $1 }.count
        let expected = 2 + agreeing   // BOS, <|system|>, then the text up to where the two differ
        #expect(expected > Count.instructions([Self.instructions]) - 2)   // nearly all of the shared sentences
        #expect(r.usage.input.cachedFromSharedStoreCount == expected && r.usage.input.cachedTokenCount == expected)
        #expect(r.invalidation?.reason == .emptyCache && r.invalidation?.recomputedFrom == expected)
        try await tuesday.expectCacheExact()
        // Tuesday's instructions went in as a branch: Monday's entry was split where the dates
        // part, so the sentences above are held once.
        let store = try model.loaded().prefixStore
        #expect(store.statistics.partialHits == 1 && store.statistics.splits == 1)
        #expect(store.checkInvariants() == nil)
    }

    @Test func rehydrated_firstRequestRestoresTheWholeTranscript() async throws {
        let model = try Self.model()
        let original = LanguageModelSession(model: model, instructions: Self.instructions)
        for prompt in ["Plan my week.", "And the long run?"] { _ = try await original.respond(to: prompt, options: short()) }
        let held = try await original.cachedTokens
        let saved = try JSONDecoder().decode(Transcript.self, from: JSONEncoder().encode(original.transcript))
        let session = LanguageModelSession(model: model, transcript: saved)
        let r = try await session.respond(to: "How fast?", options: short())
        #expect(r.usage.input.cachedTokenCount == held.count)   // every turn of the original, nothing recomputed
        #expect(r.usage.computedTokenCount == Count.prompt("How fast?") + 1)
        try await session.expectCacheExact()
    }

    @Test func relaunch_restoresAConversationFromDisk() async throws {
        let directory = Fixtures.temporaryFile("kv-relaunch")
        defer { try? FileManager.default.removeItem(at: directory) }
        let before = try Self.model(.persistent(in: directory))
        let original = LanguageModelSession(model: before, instructions: Self.instructions)
        for prompt in ["Plan my week.", "And the long run?", "Any drills?"] {
            _ = try await original.respond(to: prompt, options: short())
        }
        let held = try await original.cachedTokens
        try before.loaded().prefixStore.flush()
        let saved = try JSONEncoder().encode(original.transcript)

        // A new process: a new model (same weights), a new store on the same directory.
        let after = try Self.model(.persistent(in: directory))
        let session = LanguageModelSession(model: after, transcript: try JSONDecoder().decode(Transcript.self, from: saved))
        let r = try await session.respond(to: "How fast?", options: short())
        #expect(r.usage.input.cachedFromDiskCount == held.count && r.usage.input.cachedTokenCount == held.count)
        #expect(r.invalidation?.restoredFromDiskCount == held.count)
        try await session.expectCacheExact()
        #expect(try after.loaded().prefixStore.statistics.diskHits == 1)
    }

    /// After a relaunch, a session whose instructions differ from the saved ones only in a final
    /// date restores every row above the date from disk.
    @Test func relaunch_withInstructionsThatDifferAtTheEndRestoresTheRowsAboveFromDisk() async throws {
        let directory = Fixtures.temporaryFile("kv-relaunch-dated")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (mondayText, tuesdayText) = (Self.instructions + " Today is Monday.", Self.instructions + " Today is Tuesday.")
        let before = try Self.model(.persistent(in: directory))
        _ = try await LanguageModelSession(model: before, instructions: mondayText).respond(to: "Plan my run.", options: short())
        try before.loaded().prefixStore.flush()

        let after = try Self.model(.persistent(in: directory))   // a new process: nothing in memory
        let session = LanguageModelSession(model: after, instructions: tuesdayText)
        let r = try await session.respond(to: "Plan my run.", options: short())
        let agreeing = zip(tokenizer.encode(mondayText, bos: false), tokenizer.encode(tuesdayText, bos: false)).prefix { $0 == $1 }.count
        #expect(r.usage.input.cachedFromDiskCount == 2 + agreeing && r.usage.input.cachedTokenCount == 2 + agreeing)
        #expect(r.invalidation?.restoredFromDiskCount == 2 + agreeing)
        try await session.expectCacheExact()
        let statistics = try after.loaded().prefixStore.statistics
        #expect(statistics.diskHits == 1 && statistics.partialHits == 1 && statistics.rejectedFiles == 0)
    }

    @Test func configuration_readsTheDirectoryFromTheEnvironment() {
        let variable = PrefixStore.Configuration.directoryEnvironmentVariable
        #expect(variable == "KVSESSION_KV_CACHE_DIR")
        #expect(PrefixStore.Configuration.standard(environment: [variable: "/tmp/kv"]).directory?.path == "/tmp/kv")
        #expect(PrefixStore.Configuration.standard(environment: [variable: ""]).directory == nil)
        #expect(PrefixStore.Configuration.standard(environment: [:]).directory == nil)
    }

    @Test func pinInstructions_keepsThemThroughEviction() async throws {
        let tiny = try tinyModel.loaded()
        let rowBytes = 2 * tiny.weights.config.layerCount * tiny.weights.config.kvDim * 4
        let model = try Self.model(.memoryOnly(memoryByteLimit: 120 * rowBytes))
        let pinned = LanguageModelSession(model: model, instructions: Self.instructions)
        #expect(try await pinned.pinInstructions() == false)   // nothing computed yet
        _ = try await pinned.respond(to: "First?", options: short())
        #expect(try await pinned.pinInstructions())
        for i in 0 ..< 6 {   // other instructions fill the store and evict everything unpinned
            let other = LanguageModelSession(model: model, instructions: "Other instructions number \(i), a little longer.")
            _ = try await other.respond(to: "Question \(i)?", options: short())
        }
        let again = LanguageModelSession(model: model, instructions: Self.instructions)
        let r = try await again.respond(to: "Second?", options: short())
        #expect(r.usage.input.cachedFromSharedStoreCount == Count.instructions([Self.instructions]))
        let unpinned = try await pinned.unpinInstructions(), unpinnedTwice = try await pinned.unpinInstructions()
        #expect(unpinned && !unpinnedTwice)
        let store = try model.loaded().prefixStore
        #expect(store.statistics.evictions > 0 && store.checkInvariants() == nil)
    }

    /// Bounded stress: 8 concurrent tasks × 25 requests over 3 instruction sets, with sessions
    /// replaced by new or rehydrated ones at random and a byte limit that forces evictions. Each
    /// response's own-cache count equals an independent common-prefix count, counts add up,
    /// caches stay exact, and the store's invariants hold with no reader left at the end.
    @Test func concurrentSessions_keepCountsExactAndTheStoreConsistent() async throws {
        let tiny = try tinyModel.loaded()
        let limit = 400 * 2 * tiny.weights.config.layerCount * tiny.weights.config.kvDim * 4
        let model = try Self.model(.memoryOnly(memoryByteLimit: limit))
        let store = try model.loaded().prefixStore
        let instructionSets = ["You plan meals.", "You coach runners over many weeks.", "You edit slides."]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0 ..< 8 {
                group.addTask {
                    var rng = SeededGenerator(seed: UInt64(task))
                    let instructions = instructionSets[task % 3]
                    var session = LanguageModelSession(model: model, instructions: instructions)
                    for step in 0 ..< 25 {
                        switch rng.next() % 5 {
                        case 0: session = LanguageModelSession(model: model, instructions: instructions)
                        case 1: session = LanguageModelSession(model: model, transcript: session.transcript)
                        default: break
                        }
                        let before = try await session.cachedTokens
                        let response = try await session.respond(to: "Task \(task) step \(step)?", options: short(1 + step % 4))
                        let after = try await session.cachedTokens
                        let usage = response.usage, input = usage.input.totalTokenCount
                        let common = zip(before, after.prefix(input)).prefix { $0 == $1 }.count
                        #expect(usage.input.cachedFromSessionCount == min(common, input - 1))
                        #expect(usage.input.cachedTokenCount == usage.input.cachedFromSessionCount
                            + usage.input.cachedFromSharedStoreCount + usage.input.cachedFromDiskCount)
                        #expect(usage.computedTokenCount == input - usage.input.cachedTokenCount)
                        #expect(store.statistics.byteCount <= limit)
                        try await session.expectCacheExact()
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(store.checkInvariants() == nil)
        let statistics = store.statistics
        #expect(statistics.readerCount == 0 && statistics.memoryHits > 0 && statistics.evictions > 0)
    }
}
