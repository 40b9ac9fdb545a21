import Foundation
import LMRuntime
@testable import LMSession
import LMTestSupport
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

/// Types in a namespace that name each other, one of them as a top-level type of this module is
/// named too: the generated conformances mean the types the declarations mean.
enum Drills {
    @Generable struct Recommendation { let drill: String }   // not the top-level `Recommendation`
    @Generable struct Plan {
        @Guide(description: "One or two drills", .count(1...2))
        let recommendations: [Recommendation]
        let backup: Recommendation?
        let firstStep: Step
    }
    @Generable enum Step { case drill(Recommendation), rest(minutes: Int?) }
}

@Suite struct GuidedGenerationTests {
    @Test func generable_nestedTypesNameTheirSiblingsNotTheModulesTypes() async throws {
        let json = #"{"recommendations":[{"drill":"serve"}],"backup":null,"firstStep":{"type":"drill","value":{"drill":"volley"}}}"#
        let plan = try Drills.Plan(GeneratedContent(json: json))
        #expect(plan.recommendations.map(\.drill) == ["serve"] && plan.backup == nil)
        guard case let .drill(first) = plan.firstStep else { Issue.record("\(plan.firstStep)"); return }
        #expect(first.drill == "volley")
        #expect(try Drills.Plan(plan.generatedContent).generatedContent == plan.generatedContent)
        let partial = try Drills.Plan.PartiallyGenerated(GeneratedContent(json: #"{"backup":{"drill":"lob"}}"#))
        #expect(partial.backup?.drill == "lob" && partial.recommendations == nil)
        // Guided generation follows the nested types' schemas.
        let session = LanguageModelSession(model: tinyModel, instructions: "You are a coach.")
        let generated = try await session.respond(to: "Plan a session.", generating: Drills.Plan.self,
                                                  options: GenerationOptions(maximumResponseTokens: 120)).content
        #expect((1 ... 2).contains(generated.recommendations.count))
    }

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
        }
    }

    @Test func streamResponseGenerating_snapshotsGrowToTheFinalValue() async throws {
        let session = LanguageModelSession(model: tinyModel)
        let stream = session.streamResponse(to: "Plan", generating: AISummary.self, options: GenerationOptions(maximumResponseTokens: 130))
        var snapshots: [AISummary.PartiallyGenerated] = []
        var raws: [GeneratedContent] = []
        for try await snapshot in stream {
            snapshots.append(snapshot.content)
            raws.append(snapshot.rawContent)
        }
        let final = try await stream.collect()
        #expect(snapshots.count >= 10)
        #expect(raws.dropLast().allSatisfy { !$0.isComplete })
        #expect(raws.last == final.rawContent)
        // The first snapshots know nothing of the later properties; the last one knows them all.
        #expect(snapshots.first?.confidence == nil)
        #expect(snapshots.last?.confidence == final.content.confidence)
        #expect(snapshots.last?.recommendations?.count == final.content.recommendations.count)
        let ids = Set(snapshots.map(\.id))
        #expect(ids.count == snapshots.count, "each snapshot is read afresh; ids come from the content")
    }

    @Test func respondGenerating_transcript_rehydratesToTheSameTokensAndReusesTheCache() async throws {
        let session = LanguageModelSession(model: tinyModel, instructions: "Coach.")
        _ = try await session.respond(to: "One", generating: Ticket.self, options: GenerationOptions(maximumResponseTokens: 70))
        let saved = try JSONEncoder().encode(session.transcript)
        let transcript = try JSONDecoder().decode(Transcript.self, from: saved)
        #expect(transcript == session.transcript)
        guard case let .prompt(p) = transcript.entries[1] else { Issue.record("no prompt"); return }
        #expect(p.responseFormat?.name == "Ticket" && p.responseFormat?.isIncludedInPrompt == true)

        // The same session's next request reuses everything before its new prompt...
        let second = try await session.respond(to: "Two", options: GenerationOptions(maximumResponseTokens: 4))
        #expect(second.invalidation == nil || second.invalidation?.segment == .prompt)
        // ...and a session rehydrated from the saved transcript renders exactly the cached tokens.
        let restored = LanguageModelSession(model: tinyModel, transcript: transcript)
        let cachedBefore = try await session.cachedTokens
        _ = try await restored.respond(to: "Two", options: GenerationOptions(maximumResponseTokens: 4))
        let cachedAfter = try await restored.cachedTokens
        let common = zip(cachedBefore, cachedAfter).prefix { $0 == $1 }.count
        #expect(common > cachedBefore.count - 12, "the rehydrated session renders the structured turn as it was generated")
    }

    @Test func includeSchemaInPrompt_rendersTheSchemaAfterThePromptOnlyWhenAsked() async throws {
        let withSchema = LanguageModelSession(model: tinyModel)
        let a = try await withSchema.respond(to: "Go", generating: Ticket.self, options: GenerationOptions(maximumResponseTokens: 70))
        let without = LanguageModelSession(model: tinyModel)
        let b = try await without.respond(to: "Go", generating: Ticket.self, includeSchemaInPrompt: false,
                                          options: GenerationOptions(maximumResponseTokens: 70))
        let schemaText = PromptRenderer.describe(.init(type: Ticket.self))
        let schemaTokens = 2 + tokenizer.encode(schemaText, bos: false).count   // <|system|> text <|end|>
        #expect(a.usage.input.totalTokenCount - b.usage.input.totalTokenCount == schemaTokens)
        #expect(schemaText.contains("\"code\": string matching /[A-Z]{3}"))
        // A follow-up with another schema changes nothing before its own prompt.
        let next = try await withSchema.respond(to: "Again", generating: Mood.self, options: GenerationOptions(maximumResponseTokens: 8))
        #expect(next.usage.input.cachedTokenCount >= a.usage.input.totalTokenCount)
    }

    @Test func respondGenerating_budgetBelowTheShortestValue_isATypedErrorAndChangesNothing() async throws {
        let session = LanguageModelSession(model: tinyModel)
        do {
            _ = try await session.respond(to: "x", generating: AISummary.self, options: GenerationOptions(maximumResponseTokens: 5))
            Issue.record("accepted")
        } catch let LanguageModelError.invalidOptions(option, reason) {
            #expect(option == "maximumResponseTokens" && reason.contains("AISummary"))
        }
        #expect(session.transcript.entries.count == 1)
    }

    @Test func respondGenerating_everyBudgetFromTheMinimumUp_finishesAValidValue() async throws {
        let session = LanguageModelSession(model: tinyModel)
        let vocabulary = TokenVocabulary(tokenizer)
        let grammar = try SchemaGrammar(Ticket.generationSchema, vocabulary: vocabulary)
        let minimum = grammar.minimumLength[grammar.root]
        for budget in [minimum, minimum + 1, minimum + 7] {
            let fresh = LanguageModelSession(model: tinyModel)
            let r = try await fresh.respond(to: "Go", generating: Ticket.self, options: GenerationOptions(maximumResponseTokens: budget))
            #expect(r.usage.output.totalTokenCount <= budget)
            #expect(r.content.code.wholeMatch(of: /[A-Z]{3}-\d{2}/) != nil)
        }
        _ = session
    }

    @Test(.enabled(if: Fixtures.sharedModel("stories260K.bin") != nil, "skipped: ../shared/models/stories260K.bin is absent"))
    func respondGenerating_llama2cModelAndTokenizer_decodeValidValues() async throws {
        let model = SystemLanguageModel(checkpoint: try #require(Fixtures.sharedModel("stories260K.bin")),
                                        tokenizer: try #require(Fixtures.sharedModel("tok512.bin")))
        for seed in 0 ..< 3 {
            let session = LanguageModelSession(model: model)
            let options = GenerationOptions(samplingMode: .random(top: 40, seed: UInt64(seed)), maximumResponseTokens: 150)
            let t = try await session.respond(to: "Once upon a time", generating: Ticket.self, options: options).content
            #expect(t.code.wholeMatch(of: /[A-Z]{3}-\d{2}/) != nil)
            #expect(t.weight >= 0.5 && t.weight <= 2.25)
        }
    }

    @Test func render_guidedPrompt_reportsTheSchemaAsItsOwnSegment() {
        let renderer = PromptRenderer(tokenizer: tokenizer)
        let format = Transcript.ResponseFormat(type: Ticket.self)
        let prompt = Transcript.Prompt(text: "Go", responseFormat: format)
        let rendered = renderer.render([], history: [], prompt: prompt)
        let segments = rendered.spans.map(\.segment)
        #expect(segments == [.instructions(index: 0), .prompt, .responseSchema(name: "Ticket"), .responseHeader])
        // The same prompt in the history renders the same tokens, as one transcript entry.
        let later = renderer.render([], history: [.prompt(prompt), .response(.init(text: "{}", tokenIDs: [5]))], prompt: .init(text: "Next"))
        #expect(Array(later.tokens.prefix(rendered.tokens.count - 1)) == Array(rendered.tokens.dropLast()))
        let hidden = Transcript.ResponseFormat(type: Ticket.self, isIncludedInPrompt: false)
        let without = renderer.render([], history: [], prompt: .init(text: "Go", responseFormat: hidden))
        #expect(!without.spans.contains { if case .responseSchema = $0.segment { true } else { false } })
    }

    @Test func promptBuilder_generableValueRendersAsJSON() async throws {
        let ticket = Ticket(code: "ABC-12", priority: "low", weight: 1, scores: [11], done: true)
        let prompt = Prompt {
            "Check this ticket:"
            ticket
            if ticket.done { "It is done." }
        }
        #expect(prompt.text == "Check this ticket:\n" + #"{"code":"ABC-12","priority":"low","weight":1,"scores":[11],"done":true}"# + "\nIt is done.")
        let session = LanguageModelSession(model: tinyModel)
        let mood = try await session.respond(generating: Mood.self, options: GenerationOptions(maximumResponseTokens: 10)) {
            "How did it go?"
            ticket
        }
        #expect([Mood.calm, .focused, .tired].contains(mood.content))
        guard case let .prompt(p) = session.transcript.entries[1] else { Issue.record("no prompt"); return }
        #expect(p.text.hasSuffix(ticket.generatedContent.jsonString))
    }

    @Test func respondSchema_choiceBetweenStructures_decodesOneOfThem() async throws {
        let walk = DynamicGenerationSchema(name: "Walk", properties: [.init(name: "distance", schema: .init(type: Int.self, guides: [.range(1 ... 10)]))])
        let rest = DynamicGenerationSchema(name: "Rest", properties: [.init(name: "hours", schema: .init(type: Int.self, guides: [.range(1 ... 3)])),
                                                                      .init(name: "nap", schema: .init(type: Bool.self))])
        let plan = DynamicGenerationSchema(name: "Plan", properties: [
            .init(name: "steps", schema: .init(arrayOf: .init(name: "Step", anyOf: [walk, rest]), minimumElements: 2, maximumElements: 3)),
        ])
        let schema = try GenerationSchema(root: plan, dependencies: [])
        for seed in 0 ..< 4 {
            let session = LanguageModelSession(model: tinyModel)
            let options = GenerationOptions(samplingMode: .random(top: 30, seed: UInt64(seed)), maximumResponseTokens: 80)
            let content = try await session.respond(to: "Plan my day", schema: schema, options: options).content
            let steps = try content.value([GeneratedContent].self, forProperty: "steps")
            #expect((2 ... 3).contains(steps.count))
            for step in steps {
                if let d = try? step.value(Int.self, forProperty: "distance") {
                    #expect((1 ... 10).contains(d))
                } else {
                    #expect((1 ... 3).contains(try step.value(Int.self, forProperty: "hours")))
                    _ = try step.value(Bool.self, forProperty: "nap")
                }
            }
        }
        // The same structure twice is one choice.
        let same = DynamicGenerationSchema(name: "Same", anyOf: [walk, walk])
        let walked = try await LanguageModelSession(model: tinyModel)
            .respond(to: "x", schema: try GenerationSchema(root: same, dependencies: []), options: GenerationOptions(maximumResponseTokens: 20)).content
        #expect((1 ... 10).contains(try walked.value(Int.self, forProperty: "distance")))
    }

    /// A tagged union, the usual JSON shape of a choice between structures: each structure starts
    /// with the same property, whose fixed value says which one follows.
    @Test func respondSchema_taggedUnion_decodesEachTagWithItsOwnProperties() async throws {
        func tagged(_ name: String, _ tag: String, _ property: DynamicGenerationSchema.Property) -> DynamicGenerationSchema {
            DynamicGenerationSchema(name: name, properties: [.init(name: "type", schema: .init(name: name + "Tag", anyOf: [tag])), property])
        }
        let shape = DynamicGenerationSchema(name: "Shape", anyOf: [
            tagged("Circle", "circle", .init(name: "radius", schema: .init(type: Int.self, guides: [.range(1 ... 9)]))),
            tagged("Square", "square", .init(name: "side", schema: .init(type: Int.self, guides: [.range(10 ... 99)]))),
            tagged("Label", "label", .init(name: "text", schema: .init(type: String.self))),
        ])
        let schema = try GenerationSchema(root: .init(name: "Drawing", properties: [
            .init(name: "shapes", schema: .init(arrayOf: shape, minimumElements: 3, maximumElements: 4)),
        ]), dependencies: [])
        for seed in 0 ..< 3 {
            let session = LanguageModelSession(model: tinyModel)
            let options = GenerationOptions(samplingMode: .random(top: 40, seed: UInt64(seed)), maximumResponseTokens: 90)
            let content = try await session.respond(to: "Draw something", schema: schema, options: options).content
            for shape in try content.value([GeneratedContent].self, forProperty: "shapes") {
                guard case let .structure(_, keys) = shape.kind else { Issue.record("not a structure: \(shape.jsonString)"); continue }
                switch try shape.value(String.self, forProperty: "type") {
                case "circle":
                    #expect(keys == ["type", "radius"])
                    #expect((1 ... 9).contains(try shape.value(Int.self, forProperty: "radius")))
                case "square":
                    #expect(keys == ["type", "side"])
                    #expect((10 ... 99).contains(try shape.value(Int.self, forProperty: "side")))
                case let tag:
                    #expect(tag == "label" && keys == ["type", "text"], "\(shape.jsonString)")
                }
            }
        }
    }

    /// A property whose shape differs between the structures of a choice: the value's first byte
    /// picks the structure.
    @Test func respondSchema_structuresPartingOnAValueShape_decodeOneOfThem() async throws {
        let measured = DynamicGenerationSchema(name: "Measured", properties: [
            .init(name: "distance", schema: .init(type: Int.self, guides: [.range(1 ... 9)])),
            .init(name: "unit", schema: .init(name: "Unit", anyOf: ["km", "mi"])),
        ])
        let described = DynamicGenerationSchema(name: "Described", properties: [.init(name: "distance", schema: .init(type: String.self))])
        let schema = try GenerationSchema(root: .init(name: "Either", anyOf: [measured, described]), dependencies: [])
        for seed in 0 ..< 3 {
            let session = LanguageModelSession(model: tinyModel)
            let options = GenerationOptions(samplingMode: .random(top: 40, seed: UInt64(seed)), maximumResponseTokens: 30)
            let content = try await session.respond(to: "How far?", schema: schema, options: options).content
            guard case let .structure(_, keys) = content.kind else { Issue.record("not a structure: \(content.jsonString)"); continue }
            if let distance = try? content.value(Int.self, forProperty: "distance") {
                #expect(keys == ["distance", "unit"] && (1 ... 9).contains(distance), "\(content.jsonString)")
                #expect(["km", "mi"].contains(try content.value(String.self, forProperty: "unit")))
            } else {
                #expect(keys == ["distance"], "\(content.jsonString)")
                _ = try content.value(String.self, forProperty: "distance")
            }
        }
    }

    /// The tokens of `text` to force at the start of a response (without the tokenizer's leading space).
    static func tokens(_ text: String) -> [Int] {
        Array(tokenizer.encode(text, bos: false).drop { tokenizer.decode([$0]).allSatisfy(\.isWhitespace) })
    }

    /// Structures that part at text of different shapes (a unit among fixed ones, or any text)
    /// decode to one of them: the text is read as both up to its closing quote, and what follows
    /// is the rest of the branch (or branches) whose shape took it.
    @Test func respondSchema_structuresPartingOnTextOfDifferentShapes_decodeOneOfThem() async throws {
        let known = DynamicGenerationSchema(name: "Known", properties: [
            .init(name: "unit", schema: .init(name: "Unit", anyOf: ["km", "mi"])),
            .init(name: "distance", schema: .init(type: Int.self, guides: [.range(1 ... 9)])),
        ])
        let coded = DynamicGenerationSchema(name: "Coded", properties: [
            .init(name: "unit", schema: .init(type: String.self, guides: [.pattern(/[A-Z]{2}/)])),
            .init(name: "code", schema: .init(type: Bool.self)),
        ])
        let other = DynamicGenerationSchema(name: "Other", properties: [
            .init(name: "unit", schema: .init(type: String.self)),
            .init(name: "note", schema: .init(type: String.self)),
        ])
        let schema = try GenerationSchema(root: .init(name: "Measure", anyOf: [known, coded, other]), dependencies: [])
        // Each unit written by the model, or forced (the rest sampled): one all three shapes take
        // up to its quote, one a fixed unit and free text take, one the pattern and free text take,
        // one free text alone takes.
        for (seed, forced) in [nil, "km", "SF", "parsec"].enumerated() {
            let session = LanguageModelSession(model: tinyModel)
            let prefix = forced.map { Self.tokens(#"{"unit":""# + $0 + #"""#) } ?? []
            session.setTokenSteering { generated in generated.count < prefix.count ? prefix[generated.count] : nil }
            let options = GenerationOptions(samplingMode: .random(top: 40, seed: UInt64(seed)), maximumResponseTokens: 30)
            let content = try await session.respond(to: "How far?", schema: schema, options: options).content
            guard case let .structure(_, keys) = content.kind else { Issue.record("not a structure: \(content.jsonString)"); continue }
            let unit = try content.value(String.self, forProperty: "unit")
            if let forced { #expect(unit == forced) }
            if forced == "parsec" { #expect(keys == ["unit", "note"]) }
            switch keys {
            case ["unit", "distance"]:
                let distance = try content.value(Int.self, forProperty: "distance")
                #expect(["km", "mi"].contains(unit) && (1 ... 9).contains(distance), "\(content.jsonString)")
            case ["unit", "code"]:
                #expect(unit.wholeMatch(of: /[A-Z]{2}/) != nil, "\(content.jsonString)")
                _ = try content.value(Bool.self, forProperty: "code")
            default:
                #expect(keys == ["unit", "note"], "\(content.jsonString)")
                _ = try content.value(String.self, forProperty: "note")
            }
        }
    }

    /// Structures that part at a number of different ranges decode to one of them: the number is
    /// read under both rules to its end, and the ranges it meets pick what follows.
    @Test func respondSchema_structuresPartingOnNumberRanges_decodeOneOfThem() async throws {
        let small = DynamicGenerationSchema(name: "Small", properties: [
            .init(name: "score", schema: .init(type: Int.self, guides: [.range(0 ... 10)])),
            .init(name: "outOf", schema: .init(name: "Ten", anyOf: ["ten"])),
        ])
        let large = DynamicGenerationSchema(name: "Large", properties: [
            .init(name: "score", schema: .init(type: Int.self, guides: [.range(5 ... 100)])),
            .init(name: "percent", schema: .init(type: Bool.self)),
        ])
        let schema = try GenerationSchema(root: .init(name: "Score", anyOf: [small, large]), dependencies: [])
        // Each score sampled, or forced: one both ranges take, one only the first, one only the second.
        for (seed, forced) in [nil, "7", "3", "42"].enumerated() {
            let session = LanguageModelSession(model: tinyModel)
            let prefix = forced.map { Self.tokens(#"{"score":"# + $0 + #",""#) } ?? []
            session.setTokenSteering { generated in generated.count < prefix.count ? prefix[generated.count] : nil }
            let options = GenerationOptions(samplingMode: .random(top: 40, seed: UInt64(seed)), maximumResponseTokens: 30)
            let content = try await session.respond(to: "How good?", schema: schema, options: options).content
            guard case let .structure(_, keys) = content.kind else { Issue.record("not a structure: \(content.jsonString)"); continue }
            let score = try content.value(Int.self, forProperty: "score")
            if let forced { #expect(score == Int(forced)!, "\(content.jsonString)") }
            if keys == ["score", "outOf"] {
                let outOf = try content.value(String.self, forProperty: "outOf")
                #expect((0 ... 10).contains(score) && outOf == "ten", "\(content.jsonString)")
            } else {
                #expect(keys == ["score", "percent"] && (5 ... 100).contains(score), "\(content.jsonString)")
            }
            if forced == "3" { #expect(keys == ["score", "outOf"]) }
            if forced == "42" { #expect(keys == ["score", "percent"]) }
        }
    }

    /// Structures that agree up to a property whose arrays hold different elements, or the same
    /// elements in different counts: the elements decide, and the property after them follows.
    @Test func respondSchema_structuresPartingOnArrays_decodeOneOfThem() async throws {
        let near = DynamicGenerationSchema(name: "Near", properties: [
            .init(name: "distance", schema: .init(arrayOf: .init(type: Int.self), maximumElements: 2)),
            .init(name: "unit", schema: .init(name: "Km", anyOf: ["km"])),
        ])
        let far = DynamicGenerationSchema(name: "Far", properties: [
            .init(name: "distance", schema: .init(arrayOf: .init(type: String.self))),
            .init(name: "note", schema: .init(type: Bool.self)),
        ])
        let many = DynamicGenerationSchema(name: "Many", properties: [
            .init(name: "distance", schema: .init(arrayOf: .init(type: Int.self), minimumElements: 3, maximumElements: 4)),
            .init(name: "count", schema: .init(type: Bool.self)),
        ])
        let schema = try GenerationSchema(root: .init(name: "Either", anyOf: [near, far, many]), dependencies: [])
        // Sampled, or forced: numbers (two of them, or three), text, or an empty array.
        for (seed, forced) in [nil, "[4", "[4,5,6", "[\"", "[]"].enumerated() {
            let session = LanguageModelSession(model: tinyModel)
            let prefix = forced.map { Self.tokens(#"{"distance":"# + $0) } ?? []
            session.setTokenSteering { generated in generated.count < prefix.count ? prefix[generated.count] : nil }
            let options = GenerationOptions(samplingMode: .random(top: 40, seed: UInt64(seed)), maximumResponseTokens: 40)
            let content = try await session.respond(to: "How far?", schema: schema, options: options).content
            guard case let .structure(properties, keys) = content.kind, let distance = properties["distance"],
                  case let .array(elements) = distance.kind else {
                Issue.record("not a structure with an array: \(content.jsonString)")
                continue
            }
            let numbers = elements.allSatisfy { if case .number = $0.kind { true } else { false } }
            let texts = elements.allSatisfy { if case .string = $0.kind { true } else { false } }
            switch keys {
            case ["distance", "unit"]: #expect(numbers && elements.count <= 2, "\(content.jsonString)")
            case ["distance", "note"]: #expect(texts, "\(content.jsonString)")
            case ["distance", "count"]: #expect(numbers && (3 ... 4).contains(elements.count), "\(content.jsonString)")
            default: Issue.record("no branch's properties: \(content.jsonString)")
            }
            if forced == "[4" { #expect(keys != ["distance", "note"], "\(content.jsonString)") }
            if forced == "[4,5,6" { #expect(keys == ["distance", "count"], "\(content.jsonString)") }
            if forced == "[\"" { #expect(keys == ["distance", "note"], "\(content.jsonString)") }
            if forced == "[]" { #expect(keys != ["distance", "count"], "\(content.jsonString)") }
        }
    }

    /// Arrays whose different elements read alike for a whole element (a number both ranges
    /// take), which no grammar here follows, are refused before anything is computed, naming it.
    @Test func respondSchema_arraysWhoseElementsReadAlike_isATypedErrorAndChangesNothing() async throws {
        let reading = { (name: String, range: ClosedRange<Int>) in
            DynamicGenerationSchema(arrayOf: DynamicGenerationSchema(name: name, properties: [
                .init(name: "km", schema: .init(type: Int.self, guides: [.range(range)])),
            ]))
        }
        let schema = try GenerationSchema(root: .init(name: "Readings", anyOf: [reading("Short", 0 ... 10), reading("Long", 5 ... 100)]),
                                          dependencies: [])
        let session = LanguageModelSession(model: tinyModel)
        let entries = session.transcript.entries.count
        do {
            _ = try await session.respond(to: "How far?", schema: schema)
            Issue.record("a choice the decoder cannot follow was accepted")
        } catch let LanguageModelError.unsupportedGenerationGuide(error) {
            #expect(error.debugDescription.contains("Readings") && error.debugDescription.contains("read alike"), "\(error.debugDescription)")
        }
        #expect(session.transcript.entries.count == entries)
        #expect(try await session.cachedTokens.isEmpty)
    }

    /// A schema nested deeper than the limit, however it was put together, is refused before
    /// anything is computed, naming the limit; the session is as it was and answers the next request.
    @Test func respondSchema_nestedBeyondTheLimit_isATypedErrorAndChangesNothing() async throws {
        let node = (0 ..< 60).reduce(SchemaNode.boolean) { inner, _ in
            .array(element: inner, minimumCount: nil, maximumCount: 2)
        }
        let session = LanguageModelSession(model: tinyModel)
        let entries = session.transcript.entries.count
        do {
            _ = try await session.respond(to: "Lists?", schema: GenerationSchema(root: node))
            Issue.record("a schema 61 levels deep was accepted")
        } catch let LanguageModelError.unsupportedGenerationGuide(error) {
            #expect(error.debugDescription.contains("nested more than \(GenerationSchema.nestingLimit) levels"), "\(error.debugDescription)")
        }
        #expect(session.transcript.entries.count == entries)
        #expect(try await session.cachedTokens.isEmpty)
        let flat = GenerationSchema(root: (0 ..< 3).reduce(SchemaNode.boolean) { inner, _ in .array(element: inner, minimumCount: 1, maximumCount: 2) })
        let answer = try await session.respond(to: "Lists?", schema: flat, options: GenerationOptions(samplingMode: .greedy))
        #expect(answer.content.jsonString.hasPrefix("[[["))
    }
}
