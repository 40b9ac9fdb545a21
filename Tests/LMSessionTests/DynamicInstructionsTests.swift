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
