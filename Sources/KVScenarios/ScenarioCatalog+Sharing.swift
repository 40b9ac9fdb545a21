import Foundation
import LMRuntime
import LMSession

extension ScenarioCatalog {
    /// Groups 11 and 12: K/V shared between sessions, and kept across a relaunch.
    static let sharing: [Scenario] = [
        Scenario(name: "focus-messages", group: 11,
                 title: "One screen open: 10 focus messages and a summary, a new session each (store off)") { c in
            try await focusMessages(c)
        },
        Scenario(name: "focus-messages-shared", group: 11, title: "The same, sessions sharing the model's prefix store",
                 prefixStore: .memoryOnly()) { c in
            try await focusMessages(c)
        },
        Scenario(name: "focus-messages-timestamped", group: 11,
                 title: "Shared store, the time at the end of each session's instructions: every row above it is shared",
                 prefixStore: .memoryOnly()) { c in
            try await focusMessages(c, timestamped: true)
        },
        Scenario(name: "relaunch-cold", group: 12,
                 title: "A long conversation continued after a relaunch: rehydrated, first turn recomputes it") { c in
            let session = LanguageModelSession(model: c.model, transcript: try longConversation(c))
            try await c.turn(0, session, ScenarioTexts.relaunchPrompts[1])
        },
        Scenario(name: "relaunch-prewarm", group: 12,
                 title: "The same, rehydrated and prewarm()ed while the user types (recomputed in the background)") { c in
            let session = LanguageModelSession(model: c.model, transcript: try longConversation(c))
            session.prewarm()
            await session.waitForPrewarm()
            try await c.turn(0, session, ScenarioTexts.relaunchPrompts[1])
        },
        Scenario(name: "relaunch-disk", group: 12,
                 title: "Turn 1: a warm turn before the relaunch; turn 2: after it, K/V restored from disk") { c in
            try await relaunchFromDisk(c)
        },
        Scenario(name: "relaunch-disk-encrypted", group: 12,
                 title: "The same with the files encrypted (AES-GCM): decrypted and read on relaunch, not mapped") { c in
            try await relaunchFromDisk(c, encryptionKey: .random())
        },
    ]

    /// Ten short generations, one per error type, then a summary: each in a new session with the
    /// same instructions, as a coaching app does when a screen opens; `timestamped`, each session's
    /// instructions end with the current time (``ScenarioTexts/focusInstructions(at:)``).
    static func focusMessages(_ c: ScenarioContext, timestamped: Bool = false) async throws {
        for (t, prompt) in ScenarioTexts.focusPrompts.enumerated() {
            let instructions = timestamped ? ScenarioTexts.focusInstructions(at: t) : ScenarioTexts.focusInstructions
            let session = LanguageModelSession(model: c.model, instructions: instructions)
            try await c.turn(t, session, prompt)
        }
    }

    /// A saved conversation of about 3,000 tokens (three quarters of a smaller model's window):
    /// the travel instructions, then prompts and long answers, answers as the token ids a model
    /// would have generated.
    static func longConversation(_ c: ScenarioContext) throws -> Transcript {
        let loaded = try c.model.loaded()
        let target = min(3_000, loaded.weights.config.contextLength * 3 / 4)
        let tokenizer = loaded.tokenizer
        var entries: [Transcript.Entry] = [.instructions(.init(texts: [ScenarioTexts.travelInstructions]))]
        var tokens = tokenizer.encode(ScenarioTexts.travelInstructions, bos: false).count + 3
        var turn = 0
        while true {
            let prompt = ScenarioTexts.prompt(ScenarioTexts.travelPrompts, turn: turn)
            let answer = tokenizer.encode(ScenarioTexts.longAnswer, bos: false)
            let added = tokenizer.encode(prompt, bos: false).count + 2 + answer.count + 2
            guard tokens + added <= target else { break }
            entries += [.prompt(.init(text: prompt)), .response(.init(text: ScenarioTexts.longAnswer, tokenIDs: answer))]
            tokens += added
            turn += 1
        }
        return Transcript(entries: entries)
    }

    /// The app before the relaunch computes the conversation (prewarm) and runs a turn, with the
    /// store persisted in a directory; after the relaunch (a new model and store on the same
    /// directory: nothing in memory), the rehydrated session's first turn. With `encryptionKey`
    /// both launches encrypt the store's files with it.
    static func relaunchFromDisk(_ c: ScenarioContext, encryptionKey: PrefixStore.EncryptionKey? = nil) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kvbench-relaunch-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let loaded = try c.model.loaded()
        func launch() throws -> SystemLanguageModel {
            SystemLanguageModel(try LoadedModel(weights: loaded.weights, tokenizer: loaded.tokenizer, name: loaded.name,
                                                prefixStore: .persistent(in: directory, encryptionKey: encryptionKey)))
        }
        let before = try launch()
        let session = LanguageModelSession(model: before, transcript: try longConversation(c))
        session.prewarm()
        await session.waitForPrewarm()
        try before.loaded().prefixStore.flush()   // the files are written long before the next turn, as in an app
        try await c.turn(0, session, ScenarioTexts.relaunchPrompts[0])
        try before.loaded().prefixStore.flush()
        let after = try launch()
        let resumed = LanguageModelSession(model: after, transcript: session.transcript)
        try await c.turn(1, resumed, ScenarioTexts.relaunchPrompts[1])
    }
}
