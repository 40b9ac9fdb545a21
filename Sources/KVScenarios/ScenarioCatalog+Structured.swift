import LMSession

/// The value every structured-output turn asks for: feedback on one error type.
@Generable(description: "Feedback on one kind of error")
struct FocusFeedback {
    @Guide(description: "One sentence the player reads first")
    let message: String
    @Guide(description: "How much this error cost, from 1 to 5", .range(1 ... 5))
    let severity: Int
    let area: FocusArea
}

@Generable
enum FocusArea { case serve, footwork, backhand, forehand, volley }

extension ScenarioCatalog {
    /// Group 13: where the schema of a structured response goes, and what it costs per turn.
    static let structured: [Scenario] = [
        Scenario(name: "schema-every-prompt", group: 13,
                 title: "Structured output: the schema rendered after every prompt (includeSchemaInPrompt: true)") { c in
            try await structuredConversation(c, instructions: ScenarioTexts.focusInstructions) { _ in true }
        },
        Scenario(name: "schema-first-prompt", group: 13,
                 title: "The schema after the first prompt only, later requests send includeSchemaInPrompt: false") { c in
            try await structuredConversation(c, instructions: ScenarioTexts.focusInstructions) { $0 == 0 }
        },
        Scenario(name: "schema-in-instructions", group: 13,
                 title: "The schema declared once in the instructions, never in a prompt") { c in
            let instructions = ScenarioTexts.focusInstructions + "\nAnswer with JSON: " + FocusFeedback.generationSchema.debugDescription
            try await structuredConversation(c, instructions: instructions) { _ in false }
        },
    ]

    /// One session asking for `FocusFeedback` every turn; `includeSchema(turn)` decides the schema's place.
    static func structuredConversation(_ c: ScenarioContext, instructions: String,
                                       includeSchema: (Int) -> Bool) async throws {
        let session = LanguageModelSession(model: c.model, instructions: Instructions(instructions))
        for t in 0 ..< c.turns {
            var options = c.options(t)
            options.maximumResponseTokens = max(c.responseTokens, Self.structuredBudget)
            let prompt = ScenarioTexts.prompt(ScenarioTexts.focusPrompts, turn: t)
            let response = try await session.respond(to: Prompt(prompt), generating: FocusFeedback.self,
                                                     includeSchemaInPrompt: includeSchema(t), options: options)
            c.record(t, response)
        }
    }

    /// Tokens a structured turn may use: room for the shortest `FocusFeedback` and a sentence.
    static let structuredBudget = 48
}
