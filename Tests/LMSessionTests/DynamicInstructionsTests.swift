import Foundation
@testable import LMSession
import LMRuntime
import LMTestSupport
import Testing

struct DynamicInstructionsTests {
    struct Coach: DynamicInstructions {
        var beginner: Bool
        var goal: String?
        var extraTools: [any Tool]
        var tips: [String]

        var body: some DynamicInstructions {
            Instructions("You are a running coach.")
            WeatherTool()
            extraTools
            if beginner { "Keep every plan gentle." } else { "The user is experienced." }
            if let goal { Instructions("Goal: \(goal)") }
            ForEach(tips) { tip in Instructions("Tip: \(tip)") }
        }
    }

    static func describe(_ components: [InstructionComponent]) -> [String] {
        components.map {
            switch $0 {
            case let .text(t): "text:\(t)"
            case let .tool(t): "tool:\(t.name)"
            }
        }
    }

    @Test func body_flattensInDeclarationOrder() {
        let coach = Coach(beginner: true, goal: "10 km in March", extraTools: [CalendarTool()], tips: ["sleep", "hydrate"])
        #expect(Self.describe(coach.components()) == [
            "text:You are a running coach.", "tool:weather", "tool:calendar", "text:Keep every plan gentle.",
            "text:Goal: 10 km in March", "text:Tip: sleep", "text:Tip: hydrate",
        ])
        let other = Coach(beginner: false, goal: nil, extraTools: [], tips: [])
        #expect(Self.describe(other.components()) == [
            "text:You are a running coach.", "tool:weather", "text:The user is experienced.",
        ])
    }

    @Test func toolArrays_andOptionalsAreInstructions() {
        let tools: [WeatherTool] = [WeatherTool(), WeatherTool()]
        #expect(Self.describe(tools.components()) == ["tool:weather", "tool:weather"])
        let none: Instructions? = nil
        #expect(none.components().isEmpty)
    }

    @Test func instructionsBuilder_joinsLines() {
        let instructions = Instructions {
            "Line one."
            if true { "Line two." }
            for i in 3 ... 4 { "Line \(i)." }
        }
        #expect(instructions.text == "Line one.\nLine two.\nLine 3.\nLine 4.")
    }

    @Test func profileModifiers_applyOptionsAndHooks() async throws {
        let state = AppState()
        let profile = LanguageModelSession.Profile { Instructions("Be brief.") }
            .maximumResponseTokens(3)
            .samplingMode(.random(top: 5, seed: 1))
            .temperature(0.7)
            .onPrompt { state.counter += 1 }
            .onResponse { state.counter += 10 }
            .model(tinyModel)
        let resolved = profile.resolveProfile(path: "")
        #expect(resolved.options == GenerationOptions(samplingMode: .random(top: 5, seed: 1), temperature: 0.7, maximumResponseTokens: 3))
        let session = LanguageModelSession(profile: profile)
        let response = try await session.respond(to: "Hi")
        #expect(response.usage.output.totalTokenCount == 3)
        #expect(state.counter == 11)
        // Explicit options win over the profile's.
        let longer = try await session.respond(to: "Again", options: short(5))
        #expect(longer.usage.output.totalTokenCount == 5)
    }

    /// The modifiers take optionals as Foundation Models' do: `nil` clears what an earlier one set.
    /// The reasoning level and reasoning hooks are kept (no model here reasons).
    @Test(arguments: [true, false])
    func profileModifiers_takeOptionalsAndKeepTheReasoningLevel(likesAstronomy: Bool) {
        let budget: Int? = nil
        let profile = LanguageModelSession.Profile { Instructions("Answer questions about the sky.") }
            .temperature(0.7).temperature(nil)
            .maximumResponseTokens(40).maximumResponseTokens(budget)
            .toolCallingMode(.required).toolCallingMode(nil)
            .samplingMode(.greedy).samplingMode(nil)
            .reasoningLevel(likesAstronomy ? .deep : .light)
            .onReasoning {}
        let resolved = profile.resolveProfile(path: "")
        #expect(resolved.options == GenerationOptions())
        #expect(resolved.reasoningLevel == (likesAstronomy ? .deep : .light) && resolved.reasoningHooks.count == 1)
    }

    /// Shortens responses while the app says so; returns the content either way.
    struct Brief: LanguageModelSession.DynamicProfileModifier {
        let state: AppState
        func body(content: Content) -> some DynamicProfile {
            if state.flag { content.maximumResponseTokens(2) } else { content }
        }
    }

    /// Replaces the profile with one of its own while the app says so.
    struct Takeover: LanguageModelSession.DynamicProfileModifier {
        let state: AppState
        func body(content: Content) -> some DynamicProfile {
            if state.flag {
                LanguageModelSession.Profile { Instructions("You only say hello.") }.maximumResponseTokens(3).model(tinyModel)
            } else {
                content
            }
        }
    }

    /// A modifier's condition that returns its content either way changes the options, not the
    /// profile: no switch, the cache is kept, and the modifier's options apply.
    @Test func modifier_conditionOverItsContentKeepsTheCache() async throws {
        let state = AppState()
        let profile = LanguageModelSession.Profile { Instructions("Be brief.") }.maximumResponseTokens(4).model(tinyModel)
        let session = LanguageModelSession(profile: profile.modifier(Brief(state: state)))
        let first = try await session.respond(to: "Hi")
        #expect(first.usage.output.totalTokenCount == 4)
        state.flag = true
        let brief = try await session.respond(to: "Again")
        #expect(brief.usage.output.totalTokenCount == 2)
        #expect(brief.invalidation == nil && brief.usage.input.cachedTokenCount > 0)
        try await session.expectCacheExact()
    }

    /// A modifier's branch that returns a profile of its own is a profile switch, both ways.
    @Test func modifier_branchWithAProfileOfItsOwnIsASwitch() async throws {
        let state = AppState()
        let profile = LanguageModelSession.Profile { Instructions("Be brief.") }.maximumResponseTokens(4).model(tinyModel)
        let session = LanguageModelSession(profile: profile.modifier(Takeover(state: state)))
        _ = try await session.respond(to: "Hi")
        state.flag = true
        let taken = try await session.respond(to: "Again")
        #expect(taken.invalidation?.reason == .profileSwitch && taken.usage.output.totalTokenCount == 3)
        let kept = try await session.respond(to: "Once more")
        #expect(kept.invalidation == nil)
        state.flag = false
        let back = try await session.respond(to: "And back")
        #expect(back.invalidation?.reason == .profileSwitch && back.usage.output.totalTokenCount == 4)
        try await session.expectCacheExact()
    }

    /// Empty instructions have no components; erased ones are the wrapped value's, evaluated
    /// anew each time.
    @Test func emptyAndErasedInstructions() {
        struct Mode: DynamicInstructions {
            let state: AppState
            var body: some DynamicInstructions {
                if state.flag { "Editing images." } else { "Editing text." }
                WeatherTool()
            }
        }
        #expect(EmptyDynamicInstructions().components().isEmpty)
        let state = AppState()
        let erased = AnyDynamicInstructions(erasing: Mode(state: state))
        #expect(Self.describe(erased.components()) == ["text:Editing text.", "tool:weather"])
        state.flag = true
        #expect(Self.describe(erased.components()) == ["text:Editing images.", "tool:weather"])
        let existential: any DynamicInstructions = Mode(state: state)
        #expect(Self.describe(AnyDynamicInstructions(existential).components()) == ["text:Editing images.", "tool:weather"])
        let profile = LanguageModelSession.Profile { EmptyDynamicInstructions() }
        #expect(profile.resolveProfile(path: "").makeComponents().isEmpty)
    }

    @Test func onPrompt_errorFailsTheRequestAndChangesNothing() async throws {
        struct Refused: Error {}
        let profile = LanguageModelSession.Profile { Instructions("Be brief.") }
            .onPrompt { throw Refused() }
            .model(tinyModel)
        let session = LanguageModelSession(profile: profile)
        await #expect(throws: Refused.self) { try await session.respond(to: "Hi", options: short()) }
        #expect(session.transcript.history.isEmpty && !session.isResponding)
    }

    @Test(.enabled(if: Fixtures.sharedModel("stories260K.bin") != nil, "skipped: ../shared/models/stories260K.bin is absent"))
    func checkpointModel_withAPlainTokenizerUsesTextMarkers() async throws {
        let model = SystemLanguageModel(checkpoint: try #require(Fixtures.sharedModel("stories260K.bin")),
                                        tokenizer: try #require(Fixtures.sharedModel("tok512.bin")))
        let session = LanguageModelSession(model: model, instructions: "Tell a story.")
        let first = try await session.respond(to: "Once upon a time", options: short(8))
        let second = try await session.respond(to: "Then what?", options: short(8))
        #expect(model.contextSize == 512)
        #expect(second.usage.input.cachedTokenCount
            == first.usage.input.totalTokenCount + first.usage.output.totalTokenCount + 1)
        try await session.expectCacheExact()
    }

    @Test func systemLanguageModel_reportsContextAndTokenCounts() throws {
        #expect(tinyModel.contextSize == 1024)
        #expect(try tinyModel.tokenCount(for: "Suggest a recipe") == tokenizer.encode("Suggest a recipe", bos: false).count)
        let missing = SystemLanguageModel(named: "no-such-model")
        #expect(throws: (any Error).self) { try missing.loaded() }
    }
}
