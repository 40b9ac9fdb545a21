import Foundation
import KVScenarios
import LMRuntime
import LMSession
import LMTestSupport
import Testing

/// Token accounting of the kvbench scenarios (never times), on the bundled tiny model.
struct ScenarioTests {
    static let model = SystemLanguageModel(named: "tiny")
    static let tokenizer = Fixtures.bundledTokenizer

    func run(_ name: String, turns: Int = 4, seed: UInt64 = 0) async throws -> [ScenarioTurn] {
        let scenario = try #require(ScenarioCatalog.named(name))
        return try await ScenarioRunner(model: Self.model, turns: turns, seed: seed, responseTokens: 5).run(scenario).turns
    }

    @Test func structuredOutput_schemaPlacementDecidesTokensPerTurnNotReuse() async throws {
        let every = try await run("schema-every-prompt"), first = try await run("schema-first-prompt")
        let declared = try await run("schema-in-instructions")
        for turns in [every, first, declared] {
            for (previous, turn) in zip(turns, turns.dropFirst()) {
                #expect(turn.cached_tokens == previous.input_tokens + previous.output_tokens + 1, "\(turn.scenario)")
                #expect(turn.invalidated_at == nil)
            }
        }
        #expect(every[0].input_tokens == first[0].input_tokens)
        // After the first turn a request computes its prompt, plus the schema when it is sent again.
        let extra = zip(every, first).dropFirst().map { ($0.input_tokens - $0.cached_tokens) - ($1.input_tokens - $1.cached_tokens) }
        #expect(extra.allSatisfy { $0 == extra[0] } && extra[0] > 10)
        // Declared in the instructions: paid once, in the first turn, by every scenario alike.
        #expect(declared[0].input_tokens > first[0].input_tokens - extra[0] - 5)
        #expect(zip(declared, first).dropFirst().allSatisfy { $0.input_tokens - $0.cached_tokens == $1.input_tokens - $1.cached_tokens })
    }

    @Test func stableAppend_everyTurnReusesAllOfThePreviousTurn() async throws {
        let turns = try await run("stable-append")
        #expect(turns.first?.cached_tokens == 0 && turns.first?.invalidation_reason == "emptyCache")
        for (previous, turn) in zip(turns, turns.dropFirst()) {
            #expect(turn.cached_tokens == previous.input_tokens + previous.output_tokens + 1)
            #expect(turn.invalidated_at == nil)
        }
    }

    /// Mistral v3's template writes the system message into the newest user turn only: every
    /// request changes the previous prompt, so it recomputes from there (that prompt, its response,
    /// the new prompt with the instructions again) and keeps only what came before.
    @Test func instructionsInLastPrompt_recomputesFromThePreviousPromptEveryTurn() async throws {
        let turns = try await run("instructions-in-last-prompt")
        let instructions = Self.tokenizer.encode(ScenarioCatalogProbe.cookingInstructions + "\n\n", bos: false).count
        for (t, (previous, turn)) in zip(turns, turns.dropFirst()).enumerated() {
            #expect(turn.invalidated_segment == "transcript entry \(2 * t) (prompt)", "\(turn)")
            #expect(turn.cached_tokens == turn.invalidated_at)
            // Recomputed: at least the previous response and the instructions sent again.
            #expect(turn.input_tokens - turn.cached_tokens > previous.output_tokens + instructions)
            // Kept: less than the previous request's whole input, more than the empty instructions' three tokens.
            #expect(turn.cached_tokens > 3 + (t == 0 ? -1 : 0) && turn.cached_tokens < previous.input_tokens)
        }
    }

    /// Reasoning left out of later turns: every turn after the first keeps exactly what came
    /// before the previous turn's reasoning (that request, up to its header) and recomputes from
    /// there, the previous response included.
    @Test func reasoningEveryTurn_recomputesFromThePreviousReasoning() async throws {
        let turns = try await run("reasoning-every-turn")
        let open = Self.tokenizer.encode(continuing: "<think>\n").count   // the bundled vocabulary's markers are text
        #expect(turns.allSatisfy { $0.output_tokens > 5 })   // reasoning counted with the response
        for (t, (previous, turn)) in zip(turns, turns.dropFirst()).enumerated() {
            #expect(turn.invalidated_segment == "transcript entry \(3 * t + 2) (response)", "\(turn)")
            #expect(turn.invalidation_reason == "prefixChanged")
            // The first run's input is the request with the reasoning opened after its header.
            #expect(turn.cached_tokens == previous.input_tokens - open && turn.cached_tokens == turn.invalidated_at)
        }
    }

    /// With `prewarm()` after each reasoned answer, the next request finds that answer recomputed
    /// without its reasoning: it reuses everything up to its own prompt.
    @Test func reasoningPrewarm_keepsEveryTurnAnAppend() async throws {
        let turns = try await run("reasoning-prewarm"), plain = try await run("reasoning-every-turn")
        let open = Self.tokenizer.encode(continuing: "<think>\n").count
        for (t, turn) in turns.enumerated().dropFirst() {
            #expect(turn.invalidated_at == nil, "\(turn)")
            // It computes its prompt and the opened reasoning; without prewarm, the previous answer too.
            #expect(turn.input_tokens - turn.cached_tokens < plain[t].input_tokens - plain[t].cached_tokens)
            #expect(turn.input_tokens - turn.cached_tokens > open)
        }
    }

    @Test func changingTop_reusesNothingPastTheFirstDifferingToken() async throws {
        let turns = try await run("changing-top")
        for (i, turn) in turns.enumerated().dropFirst() {
            let before = Self.tokenizer.encode("Current time: 09:\(String(format: "%02d", (i - 1) * 7 % 60)).", bos: false)
            let now = Self.tokenizer.encode("Current time: 09:\(String(format: "%02d", i * 7 % 60)).", bos: false)
            let same = zip(before, now).prefix { $0 == $1 }.count
            #expect(turn.cached_tokens == 2 + same)   // BOS, <|system|>, then the common part of the line
            #expect(turn.invalidated_at == 2 + same && turn.invalidated_segment == "instructions (text 0)")
        }
    }

    @Test func changingBottom_keepsTheStaticInstructions() async throws {
        let turns = try await run("changing-bottom")
        let staticPart = 2 + Self.tokenizer.encode(ScenarioCatalogProbe.coachInstructions, bos: false).count
        for turn in turns.dropFirst() {
            #expect(turn.cached_tokens >= staticPart)
            #expect(turn.invalidated_segment == "instructions (text 1)")
        }
    }

    @Test func conditionals_lastKeepsMoreThanFirstAtTheToggle() async throws {
        let last = try await run("conditional-last"), first = try await run("conditional-first")
        let toggle = 2   // turns / 2 with 4 turns: the third turn (index 2)
        #expect(last[toggle].invalidated_segment == "instructions (text 2)")
        #expect(first[toggle].invalidated_segment == "instructions (text 0)")
        #expect(first[toggle].cached_tokens == 2)
        #expect(last[toggle].cached_tokens > first[toggle].cached_tokens)
        #expect(last[toggle].input_tokens == first[toggle].input_tokens)
    }

    @Test func toolGate_disallowingKeepsTheCacheWhereRemovingRecomputesEveryTurn() async throws {
        let removed = try await run("tools-removed-when-unused"), disallowed = try await run("tools-disallowed-when-unused")
        // Where the tools go or come back, at the end of the instruction text: its closing marker
        // when they go, the first definition when they come back. Everything after is recomputed.
        let instructions = 2 + Self.tokenizer.encode(ScenarioCatalogProbe.travelInstructions, bos: false).count
        for (i, turn) in removed.enumerated().dropFirst() {
            #expect(turn.invalidated_at == instructions && turn.cached_tokens == instructions, "turn \(turn.turn)")
            #expect(turn.invalidated_segment == (i % 2 == 1 ? "instructions (text 0)" : "tool definition 'weather'"))
        }
        for (previous, turn) in zip(disallowed, disallowed.dropFirst()) {
            #expect(turn.invalidated_at == nil && turn.cached_tokens == previous.input_tokens + previous.output_tokens + 1)
        }
        #expect(disallowed.map(\.recomputed_tokens).reduce(0, +) < removed.map(\.recomputed_tokens).reduce(0, +))
    }

    @Test func firstTurn_prewarmCachesTheInstructionsAndPrefix() async throws {
        let cold = try await run("first-turn-cold"), warm = try await run("first-turn-prewarm")
        let prefix = try await run("first-turn-prewarm-prefix")
        for i in cold.indices {
            #expect(cold[i].cached_tokens == 0)
            #expect(warm[i].cached_tokens == 2 + Self.tokenizer.encode(ScenarioCatalogProbe.cookingInstructions, bos: false).count + 1)
            #expect(prefix[i].cached_tokens > warm[i].cached_tokens)
            #expect(cold[i].input_tokens == warm[i].input_tokens)
        }
    }

    @Test func restorePrewarm_computesOnlyTheNewPrompt() async throws {
        let cold = try await run("restore"), warm = try await run("restore-prewarm")
        for (c, w) in zip(cold, warm) {
            #expect(c.cached_tokens == 0 && c.invalidation_reason == "emptyCache")
            #expect(w.cached_tokens == w.input_tokens - w.recomputed_tokens && w.invalidated_at == nil)
            #expect(w.input_tokens == c.input_tokens)
        }
    }

    @Test func profileSwitch_everyTurnStartsOver() async throws {
        let turns = try await run("switch-every-turn")
        for turn in turns.dropFirst() {
            #expect(turn.cached_tokens == 0 && turn.invalidation_reason == "profileSwitch")
        }
        let boundary = try await run("switch-at-boundary")
        #expect(boundary.filter { $0.invalidation_reason == "profileSwitch" }.count == 1)
    }

    @Test func nearLimit_consolidationRecomputesOnceTrimmingEveryTurn() async throws {
        let trim = try await run("trim-every-turn"), consolidate = try await run("consolidate-when-full")
        #expect(trim.allSatisfy { $0.invalidated_at != nil })
        #expect(consolidate.filter { $0.invalidated_at != nil }.count <= 1)
        #expect(consolidate.map(\.recomputed_tokens).reduce(0, +) < trim.map(\.recomputed_tokens).reduce(0, +))
    }

    @Test func everyScenario_isDeterministicForASeed() async throws {
        for scenario in ScenarioCatalog.all where !scenario.name.hasPrefix("trim") && !scenario.name.hasPrefix("consolidate") {
            let a = try await run(scenario.name, turns: 2, seed: 3), b = try await run(scenario.name, turns: 2, seed: 3)
            #expect(a.map(\.input_tokens) == b.map(\.input_tokens), "\(scenario.name)")
            #expect(a.map(\.cached_tokens) == b.map(\.cached_tokens), "\(scenario.name)")
            #expect(a.map(\.output_tokens) == b.map(\.output_tokens), "\(scenario.name)")
        }
    }
}

extension ScenarioTests {
    @Test func focusMessages_theStoreLetsEverySessionAfterTheFirstSkipTheInstructions() async throws {
        let alone = try await run("focus-messages"), shared = try await run("focus-messages-shared")
        let instructions = 2 + Self.tokenizer.encode(ScenarioCatalogProbe.focusInstructions, bos: false).count + 1
        #expect(alone.count == 11 && shared.count == 11)
        #expect(alone.allSatisfy { $0.cached_tokens == 0 && $0.invalidation_reason == "emptyCache" })
        #expect(shared[0].cached_tokens == 0)
        // Each later session restores the instructions, the `<|user|>` marker, and as much of its
        // prompt as an earlier one began with ("Error type:"), each prompt tokenized on its own.
        let prompts = ScenarioCatalogProbe.focusPrompts.map { Self.tokenizer.encode($0, bos: false) }
        for (t, turn) in shared.enumerated().dropFirst() {
            let common = prompts[..<t].map { zip(prompts[t], $0).prefix { $0 == $1 }.count }.max() ?? 0
            #expect(turn.cached_tokens == instructions + 1 + common && turn.cached_from_store == turn.cached_tokens)
            #expect(turn.cached_from_disk == 0)
        }
        #expect(shared[1].cached_tokens > instructions + 1 && shared[10].cached_tokens == instructions + 1)
        #expect(zip(alone, shared).allSatisfy { $0.input_tokens == $1.input_tokens })
    }

    /// With the time at the end of every session's instructions no two sessions' instructions are
    /// equal, yet each later session restores the rows of every token above the time.
    @Test func focusMessagesTimestamped_sessionsShareEveryRowAboveTheTime() async throws {
        let dated = try await run("focus-messages-timestamped")
        let texts = (0 ..< dated.count).map { Self.tokenizer.encode(ScenarioCatalogProbe.focusInstructions(at: $0), bos: false) }
        let plain = 2 + Self.tokenizer.encode(ScenarioCatalogProbe.focusInstructions, bos: false).count + 1
        #expect(dated.count == 11 && dated[0].cached_tokens == 0)
        for (t, turn) in dated.enumerated().dropFirst() {
            let agreeing = texts[..<t].map { zip(texts[t], $0).prefix { $0 == $1 }.count }.max() ?? 0
            #expect(agreeing < texts[t].count)   // the time differs
            #expect(turn.cached_tokens == 2 + agreeing && turn.cached_from_store == turn.cached_tokens)
            #expect(turn.cached_tokens > plain)   // the whole shared text, and "Current time: 18:" after it
        }
    }

    @Test func relaunch_diskRestoresWhatTheWarmTurnHeldAndColdRecomputesIt() async throws {
        let cold = try await run("relaunch-cold"), prewarmed = try await run("relaunch-prewarm")
        #expect(cold.count == 1 && prewarmed.count == 1)
        #expect(cold[0].cached_tokens == 0)
        #expect(prewarmed[0].input_tokens == cold[0].input_tokens)
        #expect(prewarmed[0].recomputed_tokens < 20)   // only the new prompt and the response header
        for name in ["relaunch-disk", "relaunch-disk-encrypted"] {
            let disk = try await run(name)
            try #require(disk.count == 2, "\(name)")
            let (warm, relaunched) = (disk[0], disk[1])
            #expect(warm.cached_tokens > 0 && warm.recomputed_tokens < 20, "\(name)")   // prewarmed before the relaunch
            #expect(relaunched.cached_from_disk == warm.input_tokens + warm.output_tokens + 1, "\(name)")
            #expect(relaunched.cached_tokens == relaunched.cached_from_disk, "\(name)")
        }
    }
}

/// The scenario texts the checks above count tokens of.
enum ScenarioCatalogProbe {
    static var focusInstructions: String { ScenarioCatalog.texts.focus }
    static var focusPrompts: [String] { ScenarioCatalog.texts.focusPrompts }
    static func focusInstructions(at t: Int) -> String { ScenarioCatalog.texts.focusAt(t) }
    static var coachInstructions: String { ScenarioCatalog.texts.coach }
    static var cookingInstructions: String { ScenarioCatalog.texts.cooking }
    static var travelInstructions: String { ScenarioCatalog.texts.travel }
}

/// The projected on-device time to first token counts the weight bytes at their precision.
struct ProjectorTests {
    static let device = try! JSONDecoder().decode(DeviceProfile.self, from: Data("""
        {"name": "d", "description": "test", "peakGFLOPs": 1e6, "memoryBandwidthGBps": 50,
         "computeEfficiency": 1, "bandwidthEfficiency": 1, "sources": []}
        """.utf8))

    @Test func ttft_halfWeightsStreamHalfTheMatrixBytes() throws {
        var f32 = try ModelCatalog.bundled.config(named: "base")
        f32.weightPrecision = .f32
        var f16 = f32
        f16.weightPrecision = .f16
        let norms = f32.layerCount * 2 * f32.dim + f32.dim
        #expect(f32.decodeWeightBytes - f16.decodeWeightBytes == (f32.decodeWeightBytes - 4 * norms) / 2)
        let a = Projector(config: f32, devices: [Self.device]).ttft(cached: 1000, computed: 30)["d"]!
        let b = Projector(config: f16, devices: [Self.device]).ttft(cached: 1000, computed: 30)["d"]!
        // Memory-bound on this device: prefill and the first decode step each stream the weights once.
        let saved = 2 * Double(f32.decodeWeightBytes - f16.decodeWeightBytes) / 50e9 * 1000
        #expect(abs((a - b) - saved) <= 1e-9 * a, "f32 \(a) ms, f16 \(b) ms, expected \(saved) ms less")
    }
}
