import Foundation
import LMRuntime
import LMSession
import Synchronization

/// Mutable app state a scenario's instructions or profile read at each request.
final class Flags: Sendable {
    private let state = Mutex((flag: false, counter: 0))
    var flag: Bool {
        get { state.withLock { $0.flag } }
        set { state.withLock { $0.flag = newValue } }
    }

    var counter: Int {
        get { state.withLock { $0.counter } }
        set { state.withLock { $0.counter = newValue } }
    }
}

/// What a scenario tool takes.
@Generable
struct ScenarioQuery {
    let query: String
}

/// A tool the travel scenarios offer (the scenarios never let the model call it).
struct ScenarioTool: Tool {
    let name: String
    let description: String
    func call(arguments: ScenarioQuery) async throws -> String { "No data for \(arguments.query)" }

    static let weather = ScenarioTool(name: "weather", description: "Current weather and the forecast for a city.")
    static let calendar = ScenarioTool(name: "calendar", description: "Lists and creates events in the user's calendar.")
    static let restaurants = ScenarioTool(name: "restaurants", description: "Finds restaurants near a place, with opening hours.")
}

/// A profile whose onResponse compresses the stored history when it grows (a stateful transform).
struct CompressingProfile: DynamicProfile {
    @LanguageModelSession.SessionProperty(\.history) var history
    let model: any LanguageModel
    let instructions: String
    let shouldCompress: @Sendable ([Transcript.Entry]) -> Bool
    let compressed: @Sendable ([Transcript.Entry]) -> [Transcript.Entry]

    var body: some DynamicProfile {
        LanguageModelSession.Profile { Instructions(instructions) }
            .model(model)
            .onResponse { if shouldCompress(history) { history = compressed(history) } }
    }
}

/// A profile with two branches chosen by app state; a change of branch is a profile switch.
struct ModeProfile: DynamicProfile {
    let model: any LanguageModel
    let flags: Flags
    var body: some DynamicProfile {
        if flags.flag {
            LanguageModelSession.Profile { Instructions(ScenarioTexts.cookingInstructions) }.model(model)
        } else {
            LanguageModelSession.Profile { Instructions(ScenarioTexts.editorInstructions) }.model(model)
        }
    }
}

/// Tools the app wants only on some turns (`flags.flag`): either left out of the profile on the
/// others, or kept in it with tool calls disallowed there.
struct ToolGateProfile: DynamicProfile {
    let model: any LanguageModel
    let flags: Flags
    let removesTools: Bool
    var body: some DynamicProfile {
        LanguageModelSession.Profile {
            Instructions(ScenarioTexts.travelInstructions)
            if flags.flag || !removesTools {
                ScenarioTool.weather
                ScenarioTool.restaurants
                ScenarioTool.calendar
            }
        }
        .model(model)
        .toolCallingMode(flags.flag || removesTools ? .allowed : .disallowed)
    }
}

/// The scenarios `kvbench` runs, in table order.
public enum ScenarioCatalog {
    /// Every scenario: groups 1–10 on each session's own cache, then sharing and relaunching,
    /// then where a structured response's schema goes.
    public static let all: [Scenario] = ownCache + sharing + structured

    /// Groups 1–10, each session on its own cache (the shared prefix store off).
    static let ownCache: [Scenario] = [
        Scenario(name: "stable-append", group: 1, title: "Stable instructions, append only (the baseline)") { c in
            let session = LanguageModelSession(model: c.model, instructions: ScenarioTexts.coachInstructions)
            try await c.converse(session, ScenarioTexts.coachPrompts)
        },
        Scenario(name: "changing-top", group: 2, title: "A timestamp in the first line of the instructions") { c in
            try await changingInstructions(c, atTop: true)
        },
        Scenario(name: "changing-bottom", group: 3, title: "The same timestamp at the end of the instructions") { c in
            try await changingInstructions(c, atTop: false)
        },
        Scenario(name: "conditional-last", group: 4, title: "Dynamic instructions: a conditional declared last, toggled midway") { c in
            try await conditional(c, last: true)
        },
        Scenario(name: "conditional-first", group: 4, title: "Dynamic instructions: the same conditional declared first") { c in
            try await conditional(c, last: false)
        },
        Scenario(name: "tool-added-midway", group: 5, title: "A tool added in the middle of the session") { c in
            try await tools(c, upFront: false)
        },
        Scenario(name: "tools-up-front", group: 5, title: "All tools declared from the first turn") { c in
            try await tools(c, upFront: true)
        },
        Scenario(name: "tools-removed-when-unused", group: 5, title: "Tools left out of the profile on turns that should not call them") { c in
            try await toolGate(c, removesTools: true)
        },
        Scenario(name: "tools-disallowed-when-unused", group: 5, title: "The same tools kept, with calls disallowed on those turns") { c in
            try await toolGate(c, removesTools: false)
        },
        Scenario(name: "strip-debug", group: 6, title: "Stateless in-place transform: strip debug metadata") { c in
            let profile = LanguageModelSession.Profile { Instructions(ScenarioTexts.cookingInstructions) }
                .historyTransform { $0.map(stripDebug) }
                .model(c.model)
            let session = LanguageModelSession(profile: profile)
            for t in 0 ..< c.turns {
                try await c.turn(t, session, ScenarioTexts.prompt(ScenarioTexts.cookingPrompts, turn: t) + " [debug request=\(t) build=4711]")
            }
        },
        Scenario(name: "truncate-recent", group: 6, title: "Stateless truncation to the most recent entries") { c in
            let profile = LanguageModelSession.Profile { Instructions(ScenarioTexts.cookingInstructions) }
                .historyTransform { Array($0.suffix(5)) }
                .model(c.model)
            let session = LanguageModelSession(profile: profile)
            try await c.converse(session, ScenarioTexts.cookingPrompts)
        },
        Scenario(name: "compress-on-response", group: 6, title: "Stateful compression in onResponse when the history grows") { c in
            let profile = CompressingProfile(model: c.model, instructions: ScenarioTexts.cookingInstructions,
                                             shouldCompress: { $0.count > 6 }, compressed: { Array($0.suffix(2)) })
            let session = LanguageModelSession(profile: profile)
            try await c.converse(session, ScenarioTexts.cookingPrompts)
        },
        Scenario(name: "instructions-in-last-prompt", group: 6,
                 title: "The instructions sent with the newest prompt only, as Mistral v3's chat template places them") { c in
            let profile = LanguageModelSession.Profile {}
                .historyTransform { entries in   // the new prompt comes last: it keeps them
                    entries.enumerated().map { $0.offset == entries.count - 1 ? $0.element : withoutInstructions($0.element) }
                }
                .model(c.model)
            let session = LanguageModelSession(profile: profile)
            for t in 0 ..< c.turns {
                try await c.turn(t, session, instructionsPrefix + ScenarioTexts.prompt(ScenarioTexts.cookingPrompts, turn: t))
            }
        },
        Scenario(name: "reasoning-every-turn", group: 6,
                 title: "Light reasoning before every answer, left out of later turns as reasoning models' templates do") { c in
            let session = LanguageModelSession(model: c.model, instructions: ScenarioTexts.coachInstructions)
            try await c.converse(session, ScenarioTexts.coachPrompts, contextOptions: ContextOptions(reasoningLevel: .light))
        },
        Scenario(name: "reasoning-prewarm", group: 6,
                 title: "The same reasoning, with prewarm() after each answer while the user reads and types") { c in
            let session = LanguageModelSession(model: c.model, instructions: ScenarioTexts.coachInstructions)
            for t in 0 ..< c.turns {
                try await c.turn(t, session, ScenarioTexts.prompt(ScenarioTexts.coachPrompts, turn: t),
                                 contextOptions: ContextOptions(reasoningLevel: .light))
                session.prewarm()   // recomputes the answer without its reasoning, off the next request's path
                await session.waitForPrewarm()
            }
        },
        Scenario(name: "trim-every-turn", group: 7, title: "Near the context limit: drop the oldest turn every turn") { c in
            try await nearLimit(c, consolidate: false)
        },
        Scenario(name: "consolidate-when-full", group: 7, title: "Near the context limit: one summary when nearly full") { c in
            try await nearLimit(c, consolidate: true)
        },
        Scenario(name: "first-turn-cold", group: 8, title: "First turn of a new session, cold") { c in
            try await firstTurn(c, prewarm: .none)
        },
        Scenario(name: "first-turn-prewarm", group: 8, title: "First turn after prewarm()") { c in
            try await firstTurn(c, prewarm: .instructions)
        },
        Scenario(name: "first-turn-prewarm-prefix", group: 8, title: "First turn after prewarm(promptPrefix:)") { c in
            try await firstTurn(c, prewarm: .prefix)
        },
        Scenario(name: "restore", group: 9, title: "Restore a saved conversation and continue") { c in
            try await restore(c, prewarm: false)
        },
        Scenario(name: "restore-prewarm", group: 9, title: "Restore a saved conversation, prewarm(), then continue") { c in
            try await restore(c, prewarm: true)
        },
        Scenario(name: "switch-at-boundary", group: 10, title: "One profile switch, at a natural boundary") { c in
            try await profileSwitch(c, everyTurn: false)
        },
        Scenario(name: "switch-every-turn", group: 10, title: "A profile switch on every turn") { c in
            try await profileSwitch(c, everyTurn: true)
        },
    ]

    /// The instruction texts the scenarios use, and the focus messages' prompts (tests count their tokens).
    public static let texts = (coach: ScenarioTexts.coachInstructions, cooking: ScenarioTexts.cookingInstructions,
                               travel: ScenarioTexts.travelInstructions, focus: ScenarioTexts.focusInstructions, focusPrompts: ScenarioTexts.focusPrompts,
                               focusAt: ScenarioTexts.focusInstructions(at:))

    /// The scenario named `name`.
    public static func named(_ name: String) -> Scenario? { all.first { $0.name == name } }

    /// What the scenarios of `group` compare, in a few words (a chart's panel title).
    public static func groupTitle(_ group: Int) -> String {
        switch group {
        case 1: "The baseline: stable instructions, append only"
        case 2: "A changing line at the top of the instructions"
        case 3: "The same line at the bottom instead"
        case 4: "Dynamic instructions: where a conditional is declared"
        case 5: "Tools: added midway vs up front; removed vs disallowed"
        case 6: "History transforms: stateless vs stateful"
        case 7: "Near the context limit: trim vs consolidate"
        case 8: "A new session's first turn: cold vs prewarmed"
        case 9: "Restoring a saved conversation"
        case 10: "Profile switches: once vs every turn"
        case 11: "Ten short generations on one screen: shared prefix store, and a timestamp in it"
        case 12: "An app relaunch: recompute, prewarm or disk"
        case 13: "Structured output: where the schema goes"
        default: "Group \(group)"
        }
    }

    /// Scenarios small enough for `--quick`: one of each group.
    public static let quickNames = ["stable-append", "changing-top", "conditional-last", "strip-debug", "first-turn-prewarm",
                                    "focus-messages-shared", "relaunch-disk"]

    // MARK: Scenario bodies

    /// What `instructions-in-last-prompt` puts before each new prompt: the instructions and a blank
    /// line, as Mistral v3's template writes the system message into the last user turn.
    static let instructionsPrefix = ScenarioTexts.cookingInstructions + "\n\n"

    /// A history prompt without the instructions it was sent with (the template writes them only
    /// into the newest turn, so every earlier one reads without them).
    static func withoutInstructions(_ entry: Transcript.Entry) -> Transcript.Entry {
        guard case let .prompt(p) = entry, p.text.hasPrefix(instructionsPrefix) else { return entry }
        return .prompt(.init(id: p.id, text: String(p.text.dropFirst(instructionsPrefix.count))))
    }

    static func stripDebug(_ entry: Transcript.Entry) -> Transcript.Entry {
        guard case let .prompt(p) = entry, let cut = p.text.range(of: " [debug") else { return entry }
        return .prompt(.init(text: String(p.text[..<cut.lowerBound])))
    }

    static func changingInstructions(_ c: ScenarioContext, atTop: Bool) async throws {
        let flags = Flags()
        let session = LanguageModelSession(model: c.model, dynamicInstructions: DynamicInstructionsClosure {
            if atTop { "Current time: 09:\(String(format: "%02d", flags.counter * 7 % 60))." }
            ScenarioTexts.coachInstructions
            if !atTop { "Current time: 09:\(String(format: "%02d", flags.counter * 7 % 60))." }
        })
        for t in 0 ..< c.turns {
            flags.counter = t
            try await c.turn(t, session, ScenarioTexts.prompt(ScenarioTexts.coachPrompts, turn: t))
        }
    }

    static func conditional(_ c: ScenarioContext, last: Bool) async throws {
        let flags = Flags()
        let race = "The runner races ten kilometres on Sunday: keep every session this week easy."
        let session = LanguageModelSession(model: c.model, dynamicInstructions: DynamicInstructionsClosure {
            if !last, flags.flag { race }
            ScenarioTexts.coachInstructions
            "Use kilometres and minutes per kilometre."
            if last, flags.flag { race }
        })
        for t in 0 ..< c.turns {
            flags.flag = t >= c.turns / 2
            try await c.turn(t, session, ScenarioTexts.prompt(ScenarioTexts.coachPrompts, turn: t))
        }
    }

    static func tools(_ c: ScenarioContext, upFront: Bool) async throws {
        let flags = Flags()
        let session = LanguageModelSession(model: c.model, dynamicInstructions: DynamicInstructionsClosure {
            ScenarioTexts.travelInstructions
            ScenarioTool.weather
            ScenarioTool.restaurants
            if upFront || flags.flag { ScenarioTool.calendar }
        })
        for t in 0 ..< c.turns {
            flags.flag = t >= c.turns / 2
            try await c.turn(t, session, ScenarioTexts.prompt(ScenarioTexts.travelPrompts, turn: t))
        }
    }

    /// A travel chat that wants its tools on every other turn (planning) and not between (small
    /// talk): removed there, the tool definitions change every turn; disallowed, nothing does.
    static func toolGate(_ c: ScenarioContext, removesTools: Bool) async throws {
        let flags = Flags()
        let session = LanguageModelSession(profile: ToolGateProfile(model: c.model, flags: flags, removesTools: removesTools))
        for t in 0 ..< c.turns {
            flags.flag = t % 2 == 0
            try await c.turn(t, session, ScenarioTexts.prompt(ScenarioTexts.travelPrompts, turn: t))
        }
    }

    /// A conversation restored near the context limit, continued for `turns` turns.
    static func nearLimit(_ c: ScenarioContext, consolidate: Bool) async throws {
        let loaded = try c.model.loaded()
        let tokenizer = loaded.tokenizer, contextSize = loaded.weights.config.contextLength
        @Sendable func size(_ entries: [Transcript.Entry]) -> Int {
            entries.map { entry -> Int in
                switch entry {
                case let .prompt(p): tokenizer.encode(p.text, bos: false).count + 2
                case let .response(r): r.tokenIDs.count + 2
                default: 0
                }
            }.reduce(0, +)
        }
        // Fill the history to about 85% of the window with earlier turns, leaving
        // room for the instructions and the measured turns (so any context size works).
        let instructionTokens = tokenizer.encode(ScenarioTexts.coachInstructions, bos: false).count + 8
        let turnTokens = ScenarioTexts.coachPrompts.map { tokenizer.encode($0, bos: false).count }.max()! + c.responseTokens + 16
        let target = contextSize * 85 / 100 - instructionTokens - turnTokens
        var history: [Transcript.Entry] = []
        let answer = tokenizer.encode(ScenarioTexts.longAnswer, bos: false)
        var i = 0
        while true {
            let next: [Transcript.Entry] = [.prompt(.init(text: ScenarioTexts.prompt(ScenarioTexts.coachPrompts, turn: i))),
                                            .response(.init(text: ScenarioTexts.longAnswer, tokenIDs: answer))]
            guard size(history + next) <= target else { break }
            history += next
            i += 1
        }
        // Consolidate after about two more turns, and always while one more still fits below 90%.
        let limit = min(target + 2 * turnTokens, contextSize * 9 / 10 - instructionTokens - turnTokens)
        let profile: any DynamicProfile
        if consolidate {
            let summary: [Transcript.Entry] = [.prompt(.init(text: ScenarioTexts.summary)),
                                               .response(.init(text: "Noted.", tokenIDs: tokenizer.encode("Noted.", bos: false)))]
            profile = CompressingProfile(model: c.model, instructions: ScenarioTexts.coachInstructions,
                                         shouldCompress: { size($0) > limit }, compressed: { summary + $0.suffix(2) })
        } else {
            let keep = max(2, history.count)
            profile = LanguageModelSession.Profile { Instructions(ScenarioTexts.coachInstructions) }
                .historyTransform { Array($0.suffix(keep)) }
                .model(c.model)
        }
        let session = LanguageModelSession(profile: AnyDynamicProfile(profile), history: history)
        session.prewarm()   // the restored conversation is warm before the first measured turn
        await session.waitForPrewarm()
        for t in 0 ..< c.turns { try await c.turn(t, session, ScenarioTexts.prompt(ScenarioTexts.coachPrompts, turn: t + 3)) }
    }

    enum Prewarm { case none, instructions, prefix }

    static func firstTurn(_ c: ScenarioContext, prewarm: Prewarm) async throws {
        for t in 0 ..< c.turns {
            let session = LanguageModelSession(model: c.model, instructions: ScenarioTexts.cookingInstructions)
            let prompt = ScenarioTexts.prompt(ScenarioTexts.cookingPrompts, turn: t)
            switch prewarm {
            case .none: break
            case .instructions: session.prewarm()
            case .prefix: session.prewarm(promptPrefix: Prompt(prompt.split(separator: " ").prefix(3).joined(separator: " ")))
            }
            await session.waitForPrewarm()   // the user is still typing while the cache warms
            try await c.turn(t, session, prompt)
        }
    }

    static func restore(_ c: ScenarioContext, prewarm: Bool) async throws {
        let original = LanguageModelSession(model: c.model, instructions: ScenarioTexts.travelInstructions)
        for t in 0 ..< 3 {
            _ = try await original.respond(to: Prompt(ScenarioTexts.prompt(ScenarioTexts.travelPrompts, turn: t)), options: c.options(t))
        }
        let saved = try JSONEncoder().encode(original.transcript)
        for t in 0 ..< c.turns {
            let session = LanguageModelSession(model: c.model, transcript: try JSONDecoder().decode(Transcript.self, from: saved))
            if prewarm {
                session.prewarm()
                await session.waitForPrewarm()
            }
            try await c.turn(t, session, ScenarioTexts.prompt(ScenarioTexts.travelPrompts, turn: t + 3))
        }
    }

    static func profileSwitch(_ c: ScenarioContext, everyTurn: Bool) async throws {
        let flags = Flags()
        let session = LanguageModelSession(profile: ModeProfile(model: c.model, flags: flags))
        for t in 0 ..< c.turns {
            flags.flag = everyTurn ? t % 2 == 1 : t >= c.turns / 2
            let prompts = flags.flag ? ScenarioTexts.cookingPrompts : ScenarioTexts.editorPrompts
            try await c.turn(t, session, ScenarioTexts.prompt(prompts, turn: t))
        }
    }
}
