import Foundation
import LMRuntime
@testable import LMSession
import Testing

// The seed example of issue 12, as an app written for FoundationModels declares it.
@Generable
struct Recommendation {
    @Guide(description: "A short title for the drill")
    let title: String
    @Guide(description: "What to do and why")
    let description: String
}

@Generable
struct AISummary {
    @Guide(description: "Overall performance insight and analysis text")
    let overallInsight: String
    @Guide(description: "Array of 2-3 personalized drill recommendations with titles and descriptions", .count(2...3))
    let recommendations: [Recommendation]
    @Guide(description: "Confidence from 1 to 5", .range(1...5))
    let confidence: Int
    let mood: Mood
    let note: String?
}

@Generable(description: "How the session went")
enum Mood { case calm, focused, tired }

@Generable
struct Ticket {
    @Guide(.pattern(/[A-Z]{3}-\d{2}/))
    let code: String
    @Guide(.anyOf(["low", "high"]))
    let priority: String
    @Guide(.minimum(0.5), .maximum(2.25))
    let weight: Double
    @Guide(.maximumCount(2), .element(.range(10...20)))
    let scores: [Int]
    let done: Bool
}

@Suite struct GuidedGenerationTests {
    @Test func respondGenerating_seedExample_decodesAValidInstance() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: "You are a coach.")
        let prompt = "Summarize my week."
        let summary = try await session.respond(to: prompt, generating: AISummary.self,
                                                options: GenerationOptions(maximumResponseTokens: 120)).content
        #expect((2 ... 3).contains(summary.recommendations.count))
        #expect((1 ... 5).contains(summary.confidence))
        #expect(session.transcript.entries.count == 3)
        guard case let .response(r) = session.transcript.entries.last else { Issue.record("no response"); return }
        #expect(r.structure?.source == "AISummary")
        #expect(try AISummary(r.structure!.content).confidence == summary.confidence)
    }

    @Test func respondGenerating_guides_holdInEveryResponse() async throws {
        for seed in 0 ..< 6 {
            let session = LanguageModelSession(model: tinyModel)
            let options = GenerationOptions(samplingMode: .random(top: 50, seed: UInt64(seed)), temperature: 1.5, maximumResponseTokens: 60)
            let t = try await session.respond(to: "Open a ticket", generating: Ticket.self, options: options).content
            #expect(t.code.wholeMatch(of: /[A-Z]{3}-\d{2}/) != nil, "\(t.code)")
            #expect(["low", "high"].contains(t.priority))
            #expect(t.weight >= 0.5 && t.weight <= 2.25)
            #expect(t.scores.count <= 2 && t.scores.allSatisfy { (10 ... 20).contains($0) })
            print(t.generatedContent.jsonString)
        }
    }
}
