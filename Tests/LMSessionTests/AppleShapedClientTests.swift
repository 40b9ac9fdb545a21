import Foundation
import LMSession
import Observation
import Testing

// Code as an app written from FoundationModels' documentation has it: only `import LMSession`
// (no @testable), Swift 6 mode. If this file compiles, the shapes are there; the tests check
// they behave as documented.

@Generable
struct TripIdea {
    @Guide(description: "A short title")
    let title: String
    @Guide(description: "Two to four stops", .count(2...4))
    let stops: [String]
    @Guide(description: "Days, 1 to 7", .range(1...7))
    let days: Int
}

@Generable
enum Activity {
    case walk(distance: Int)
    case rest(hours: Int, nap: Bool)
    case note(String)
    case idle
}

@Generable(description: "One change to a list.")
enum Edit: Equatable {
    case insert(item: String, at: Position)
    case move(Position, to: Position)
    case swap(Int, Int)
    case comment(String?)
    case clear
}

@Generable
enum Position: Equatable {
    case index(Int)
    case named(String)
}

@Generable
struct DayPlan {
    @Guide(description: "Two or three activities", .count(2...3))
    let activities: [Activity]
}

struct ForecastTool: Tool {
    let description = "Current weather for a city."
    @Generable struct Arguments {
        @Guide(description: "A city name") let city: String
        @Guide(description: "Days ahead", .range(0...3)) let days: Int
    }
    func call(arguments: Arguments) async throws -> String {
        guard (0 ... 3).contains(arguments.days) else { throw LanguageModelError.invalidOptions(option: "days", reason: "out of range") }
        return "Sunny in \(arguments.city)"
    }
}

/// A tool that keeps its schema out of the instructions.
struct QuietTool: Tool {
    let description = "Weather, schema not shown."
    var includesSchemaInInstructions: Bool { false }
    func call(arguments: ForecastTool.Arguments) async throws -> String { "Sunny" }
}

struct TripProfile: DynamicProfile {
    @SessionProperty(\.history) var history
    var body: some DynamicProfile {
        Profile { Instructions("Plan trips.") }
            .model(AppleShapedClientTests.tiny)
            .onResponse { if history.count > 4 { history = Array(history.suffix(2)) } }
    }
}

@Suite struct AppleShapedClientTests {
    static let tiny = SystemLanguageModel(named: "tiny", prefixStore: .memoryOnly(memoryByteLimit: 0))

    @Test func guidedAndTools_readAsAppleDocumentsThem() async throws {
        let session = LanguageModelSession(model: Self.tiny, tools: [ForecastTool()], instructions: "Plan trips.")
        let idea = try await session.respond(to: "A weekend idea", generating: TripIdea.self,
                                             options: GenerationOptions(maximumResponseTokens: 80)).content
        #expect((2 ... 4).contains(idea.stops.count) && (1 ... 7).contains(idea.days))
        // `.required` in a request's options, as Apple documents it: the session keeps calling
        // until a tool throws; this one never does, so the rounds end when the window is full.
        do {
            _ = try await session.respond(to: "Weather?", options: GenerationOptions(maximumResponseTokens: 30, toolCallingMode: .required))
            Issue.record("a request that must call tools answered")
        } catch LanguageModelError.contextSizeExceeded {}
        #expect(session.transcript.entries.filter { $0.kind == "toolCalls" }.count > 4)   // past `.allowed`'s round limit
        for entry in session.transcript.entries {
            switch entry {
            case let .toolCalls(calls): #expect(calls.calls.first?.toolName == "ForecastTool")
            case let .toolOutput(output): #expect(output.text.hasPrefix("Sunny in "))
            default: break
            }
        }
        guard case let .response(r)? = session.transcript.entries.dropFirst(2).first, case .structure? = r.segments.first else {
            Issue.record("the structured response is not in the transcript"); return
        }
    }

    @Test func errors_bothCatchStylesCompileAndTheThrownOneIsLanguageModelError() async throws {
        let session = LanguageModelSession(model: Self.tiny)
        let long = String(repeating: "word ", count: 3000)
        do {
            _ = try await session.respond(to: long)
            Issue.record("no error")
        } catch let LanguageModelError.contextSizeExceeded(context) {
            #expect(context.tokenCount > context.contextSize)
            #expect(context.debugDescription.contains("\(context.contextSize)"))
            if case .exceededContextWindowSize = LanguageModelError.contextSizeExceeded(context).generationError {} else {
                Issue.record("the iOS 26 form differs")
            }
        } catch let error as LanguageModelSession.GenerationError {
            Issue.record("the session throws LanguageModelError, not \(error)")
        }
    }

    @Test func errors_iOS27FormsCompileAndTheSessionThrowsThem() async throws {
        // A model whose files are missing throws SystemLanguageModel.Error, as on iOS 27.
        let missing = SystemLanguageModel(checkpoint: URL(fileURLWithPath: "/nonexistent/model.bin"),
                                          tokenizer: URL(fileURLWithPath: "/nonexistent/tokenizer.bin"))
        do {
            _ = try await LanguageModelSession(model: missing).respond(to: "Hi")
            Issue.record("no error")
        } catch SystemLanguageModel.Error.assetsUnavailable(let info) {
            #expect(info.loadError != nil && info.debugDescription.contains("nonexistent"))
            guard case .assetsUnavailable = SystemLanguageModel.Error.assetsUnavailable(info).generationError else {
                Issue.record("the iOS 26 form differs"); return
            }
        }

        // Every iOS 27 case, built with FoundationModels' initializers.
        let reset = Date(timeIntervalSince1970: 1_000)
        let errors: [LanguageModelError] = [
            .contextSizeExceeded(.init(contextSize: 4096, tokenCount: 5000, debugDescription: "too long")),
            .rateLimited(.init(resetDate: reset, debugDescription: "slow down", metadata: ["retry": 3])),
            .refusal(.init(explanation: "I cannot plan that trip.", debugDescription: "declined")),
            .timeout(.init(debugDescription: "late")),
            .guardrailViolation(.init(debugDescription: "unsafe")),
            .unsupportedCapability(.init(capability: .reasoning, debugDescription: "no reasoning")),
            .unsupportedTranscriptContent(.init(unsupportedContent: [], debugDescription: "odd entries")),
            .unsupportedGenerationGuide(.init(schemaName: "TripIdea", debugDescription: "bad pattern")),
            .unsupportedLanguageOrLocale(.init(languageCode: Locale.LanguageCode("fr"), debugDescription: "French")),
        ]
        let facts = errors.map { error -> String in
            switch error {
            case let .contextSizeExceeded(e): "\(e.tokenCount)/\(e.contextSize)"
            case let .rateLimited(e): "\(e.resetDate!.timeIntervalSince1970)"
            case let .refusal(e): e.debugDescription
            case let .timeout(e): e.debugDescription
            case let .guardrailViolation(e): e.debugDescription
            case let .unsupportedCapability(e): "\(e.capability)"
            case let .unsupportedTranscriptContent(e): "\(e.unsupportedContent.count)"
            case let .unsupportedGenerationGuide(e): e.schemaName ?? "-"
            case let .unsupportedLanguageOrLocale(e): e.languageCode.identifier
            default: "other"   // this package's own cases
            }
        }
        #expect(facts == ["5000/4096", "1000.0", "declined", "late", "unsafe", "reasoning", "0", "TripIdea", "fr"])
        #expect(zip(errors, ["too long", "slow down", "declined", "late", "unsafe", "no reasoning", "odd entries",
                             "bad pattern", "French"]).allSatisfy { $0.localizedDescription.contains($1) })
        let iOS26 = errors.map { error -> String in
            switch error.generationError {
            case .exceededContextWindowSize: "exceededContextWindowSize"
            case .rateLimited: "rateLimited"
            case .refusal: "refusal"
            case .guardrailViolation: "guardrailViolation"
            case .unsupportedGuide: "unsupportedGuide"
            case .unsupportedLanguageOrLocale: "unsupportedLanguageOrLocale"
            case .decodingFailure: "decodingFailure"
            default: "other"
            }
        }
        #expect(iOS26 == ["exceededContextWindowSize", "rateLimited", "refusal", "decodingFailure", "guardrailViolation",
                          "decodingFailure", "decodingFailure", "unsupportedGuide", "unsupportedLanguageOrLocale"])

        // Metadata is kept and takes no part in equality.
        guard case let .rateLimited(limited) = errors[1] else { return }
        #expect(limited.metadata["retry"] as? Int == 3)
        #expect(errors[1] == .rateLimited(.init(resetDate: reset, debugDescription: "slow down")))
        #expect(errors[1] != .rateLimited(.init(resetDate: nil, debugDescription: "slow down")))

        // A refusal's explanation, as a response and as a stream, in both shapes.
        guard case let .refusal(refusal) = errors[2], case let .refusal(old, context) = errors[2].generationError else {
            Issue.record("no refusal"); return
        }
        #expect(try await refusal.explanation.content == "I cannot plan that trip.")
        var streamed: [String] = []
        for try await snapshot in refusal.explanationStream { streamed.append(snapshot.content) }
        #expect(streamed == ["I cannot plan that trip."])
        #expect(try await old.explanation.content == "I cannot plan that trip.")
        #expect(try await old.explanationStream.collect().content == "I cannot plan that trip.")
        #expect(context.debugDescription.contains("declined"))
    }

    @Test func usage_iOS27InitializerAndReasoningCount() async throws {
        let made = LanguageModelSession.Usage(input: .init(totalTokenCount: 10, cachedTokenCount: 4),
                                              output: .init(totalTokenCount: 3, reasoningTokenCount: 1), metadata: ["device": "test"])
        #expect(made.input.totalTokenCount == 10 && made.input.cachedTokenCount == 4 && made.cacheHitRate == 0.4)
        #expect(made.output.totalTokenCount == 3 && made.output.reasoningTokenCount == 1)
        #expect(made.metadata["device"] == GeneratedContent("test"))
        let session = LanguageModelSession(model: Self.tiny)
        let response = try await session.respond(to: "Hi", options: GenerationOptions(maximumResponseTokens: 3))
        #expect(response.usage.output == .init(totalTokenCount: 3, reasoningTokenCount: 0) && response.usage.metadata.isEmpty)
        #expect(session.usage.output.reasoningTokenCount == 0)
    }

    @Test func feedbackAttachment_holdsTheTranscriptAndTheFeedback() async throws {
        struct Attachment: Decodable {
            let sentiment: LanguageModelFeedback.Sentiment?
            let issues: [LanguageModelFeedback.Issue]
            let desiredOutput: Transcript.Entry?
            let transcript: Transcript
        }
        let session = LanguageModelSession(model: Self.tiny, instructions: "Plan trips.")
        _ = try await session.respond(to: "Plan a trip.", options: GenerationOptions(maximumResponseTokens: 4))
        let tooLong = LanguageModelFeedback.Issue(category: .tooVerbose, explanation: "Too long.")
        let text = try JSONDecoder().decode(Attachment.self, from: session.logFeedbackAttachment(
            sentiment: .negative, issues: [tooLong], desiredResponseText: "A day at the sea."))
        #expect(text.sentiment == .negative && text.issues == [tooLong] && text.transcript == session.transcript)
        guard case let .response(wanted)? = text.desiredOutput, case let .text(segment)? = wanted.segments.first else {
            Issue.record("\(String(describing: text.desiredOutput))"); return
        }
        #expect(segment.content == "A day at the sea.")

        let content = GeneratedContent(properties: ["title": "Sea"])
        let structured = try JSONDecoder().decode(Attachment.self, from: session.logFeedbackAttachment(
            sentiment: nil, desiredResponseContent: content))
        guard case let .response(wantedContent)? = structured.desiredOutput, case let .structure(value)? = wantedContent.segments.first else {
            Issue.record("\(String(describing: structured.desiredOutput))"); return
        }
        #expect(value.content == content && structured.sentiment == nil && structured.issues.isEmpty)

        let plain = session.logFeedbackAttachment(sentiment: .positive)
        let keys = try #require(try JSONSerialization.jsonObject(with: plain) as? [String: Any]).keys.sorted()
        #expect(keys == ["issues", "sentiment", "transcript"])
        #expect(LanguageModelFeedback.Issue.Category.allCases.count == 8 && LanguageModelFeedback.Sentiment.allCases.count == 3)
    }

    @Test func refusal_iOS26FormAsksTheModelToExplainTheRefusedEntries() async throws {
        let session = LanguageModelSession(model: Self.tiny, instructions: "Plan trips.")
        _ = try await session.respond(to: "Plan a trip to the sea.", options: GenerationOptions(maximumResponseTokens: 4))
        let refusal = LanguageModelSession.GenerationError.Refusal(transcriptEntries: session.transcript.entries, model: Self.tiny)
        let explanation = try await refusal.explanation
        guard case let .prompt(question)? = explanation.transcriptEntries.first, case .response? = explanation.transcriptEntries.last else {
            Issue.record("\(explanation.transcriptEntries)"); return
        }
        #expect(question.segments.description.contains("declined to respond"))
        // The question came after the refused entries: asked alone, it takes fewer tokens by their size.
        let alone = try await LanguageModelSession(model: Self.tiny, instructions: "Plan trips.")
            .respond(to: "Explain briefly why you declined to respond.", options: GenerationOptions(maximumResponseTokens: 1))
        let refused = try await Self.tiny.tokenCount(for: session.transcript.entries.dropFirst())
        #expect(explanation.usage.input.totalTokenCount == alone.usage.input.totalTokenCount + refused)
        #expect(explanation.usage.output.totalTokenCount <= 200)
        #expect(session.transcript.entries.count == 3)   // the refused session is left as it was
    }

    @Test func availability_reportsMissingFilesInsteadOfThrowingLater() async throws {
        #expect(Self.tiny.availability == .available && Self.tiny.isAvailable)
        let missing = SystemLanguageModel(checkpoint: URL(fileURLWithPath: "/nonexistent/model.bin"),
                                          tokenizer: URL(fileURLWithPath: "/nonexistent/tokenizer.bin"))
        guard case .unavailable(.modelFilesInvalid) = missing.availability else {
            Issue.record("\(missing.availability)"); return
        }
        #expect(!missing.isAvailable && missing.contextSize == 0)
        let session = LanguageModelSession(model: missing)
        await #expect(throws: SystemLanguageModel.Error.self) { try await session.respond(to: "Hi") }
        #expect(SystemLanguageModel.default.supportsLocale(Locale(identifier: "en_US")))
        #expect(!SystemLanguageModel.default.supportsLocale(Locale(identifier: "fr_FR")))
        #expect(SystemLanguageModel(useCase: .contentTagging, guardrails: .default).contextSize == 4096)
    }

    @Test func tokenCounts_addUpToWhatARequestRenders() async throws {
        let instructions = Instructions("Plan trips.")
        let session = LanguageModelSession(model: Self.tiny, instructions: instructions)
        let response = try await session.respond(to: "A weekend idea", options: GenerationOptions(maximumResponseTokens: 3))
        let counted = try await Self.tiny.tokenCount(for: instructions) + Self.tiny.tokenCount(for: Prompt("A weekend idea")) + 1
        #expect(counted == response.usage.input.totalTokenCount)
        let history = try await Self.tiny.tokenCount(for: response.transcriptEntries)
        let prompt = try await Self.tiny.tokenCount(for: Prompt("A weekend idea"))
        #expect(history == prompt + 1 + response.usage.output.totalTokenCount + 1)   // <|user|>…<|end|>, <|assistant|>…<|end|>
        #expect(try await Self.tiny.tokenCount(for: TripIdea.generationSchema) > 10)
        #expect(try await Self.tiny.tokenCount(for: [ForecastTool()]) > 5)
    }

    @available(*, deprecated, message: "exercises the iOS 26 spellings")
    @Test func options_iOS26SpellingsStillWork() {
        var options = GenerationOptions(sampling: .greedy, temperature: 0.5, maximumResponseTokens: 9)
        #expect(options.samplingMode == .greedy && options.sampling == .greedy)
        options.sampling = .random(top: 3)
        #expect(options.samplingMode == .random(top: 3))
    }

    @Test func transcript_entriesAreIdentifiableSegmentedAndSettable() async throws {
        let session = LanguageModelSession(profile: TripProfile())
        _ = try await session.respond(to: "One", options: GenerationOptions(maximumResponseTokens: 3))
        let entries = session.transcript.entries
        #expect(Set(entries.map(\.id)).count == entries.count)
        for entry in entries {
            switch entry {
            case let .instructions(i): #expect(i.segments.count == 1)
            case let .prompt(p):
                guard case let .text(t) = p.segments.first else { Issue.record("no text segment"); return }
                #expect(t.content == "One")
            case let .response(r): #expect(r.segments.count == 1)
            case .toolCalls, .toolOutput, .reasoning: Issue.record("unexpected \(entry.kind)")
            }
        }
        // Ids survive a save and load; a transcript saved without ids gets fresh ones.
        let data = try JSONEncoder().encode(session.transcript)
        let loaded = try JSONDecoder().decode(Transcript.self, from: data)
        #expect(loaded.entries.map(\.id) == entries.map(\.id))
        // Setting the transcript replaces the history; the next request renders it.
        session.transcript = Transcript(entries: [.prompt(.init(text: "Earlier")), .response(.init(text: "Yes.", tokenIDs: []))])
        #expect(session.transcript.history.count == 2)
        let next = try await session.respond(to: "Two", options: GenerationOptions(maximumResponseTokens: 3))
        #expect(next.invalidation?.segment == .transcriptEntry(index: 0, kind: "prompt"))
        #expect(session.transcript.history.count == 4)
    }

    @Test func transcript_builtWithFoundationModelsInitializersRehydrates() async throws {
        // A transcript an app assembles itself (from its own storage), with FoundationModels' initializers.
        let arguments = GeneratedContent(properties: ["city": "Porto", "days": 1])
        let built = Transcript(entries: [
            .instructions(Transcript.Instructions(id: "i", segments: [.text(Transcript.TextSegment(id: "s0", content: "Plan trips."))],
                                                  toolDefinitions: [Transcript.ToolDefinition(tool: ForecastTool())])),
            .prompt(Transcript.Prompt(id: "p", segments: [.text(Transcript.TextSegment(id: "s1", content: "Weather in Porto?"))])),
            .toolCalls(Transcript.ToolCalls(id: "c", [Transcript.ToolCall(id: "call", toolName: "ForecastTool", arguments: arguments)])),
            .toolOutput(Transcript.ToolOutput(id: "o", toolName: "ForecastTool",
                                              segments: [.text(Transcript.TextSegment(id: "s2", content: "Sunny in Porto"))])),
            .response(Transcript.Response(id: "r", assetIDs: [], segments: [
                .structure(Transcript.StructuredSegment(id: "s3", source: "Note", content: GeneratedContent(properties: ["ok": true]))),
            ])),
        ])
        #expect(built.map(\.id) == ["i", "p", "c", "o", "r"])
        guard case let .toolCalls(calls) = built[2], case let .toolOutput(output) = built[3], case let .response(response) = built[4] else {
            Issue.record("entries out of order"); return
        }
        #expect(calls.id == "c" && calls.map(\.id) == ["call"] && calls[0].arguments == arguments)
        #expect(output.text == "Sunny in Porto" && response.segments.map(\.id) == ["s3"])
        let definition = Transcript.ToolDefinition(tool: ForecastTool())
        #expect(definition.parameters == ForecastTool.Arguments.generationSchema && definition.name == "ForecastTool")
        #expect(Transcript.ToolDefinition(name: "ForecastTool", description: ForecastTool().description,
                                          parameters: ForecastTool.Arguments.generationSchema) == definition)
        // Every identifier, the calls' and the segments' too, survives a save and a load.
        let loaded = try JSONDecoder().decode(Transcript.self, from: try JSONEncoder().encode(built))
        #expect(loaded == built)
        guard case let .toolCalls(loadedCalls) = loaded[2], case let .response(loadedResponse) = loaded[4] else { return }
        #expect(loadedCalls.map(\.id) == ["call"] && loadedResponse.segments.map(\.id) == ["s3"])
        // A session continues it; the history it renders is the app's, and the next turn reuses all of it.
        let session = LanguageModelSession(model: Self.tiny, tools: [ForecastTool()], transcript: loaded)
        let first = try await session.respond(to: "Thanks.", options: GenerationOptions(maximumResponseTokens: 3))
        #expect(first.usage.input.cachedTokenCount == 0)
        #expect(session.transcript.history.prefix(4).map(\.id) == ["p", "c", "o", "r"])
        let second = try await session.respond(to: "Bye.", options: GenerationOptions(maximumResponseTokens: 3))
        #expect(second.invalidation == nil && second.usage.input.cachedTokenCount > 0)
    }

    @Test func toolDefinition_parametersAndTheTextTheModelReads() throws {
        var shown = Transcript.ToolDefinition(name: "t", description: "d", parameters: ForecastTool.Arguments.generationSchema)
        #expect(shown.argumentsSchema == ForecastTool.Arguments.generationSchema.debugDescription)
        shown.parameters = TripIdea.generationSchema       // the text follows the schema
        #expect(shown.argumentsSchema == TripIdea.generationSchema.debugDescription)
        var hidden = Transcript.ToolDefinition(tool: QuietTool())
        #expect(hidden.argumentsSchema.isEmpty && hidden.parameters == ForecastTool.Arguments.generationSchema)
        hidden.parameters = TripIdea.generationSchema      // a tool that hides its schema keeps it hidden
        #expect(hidden.argumentsSchema.isEmpty)
        // Saved before definitions kept their schema: the text stays what the model read.
        let old = try JSONDecoder().decode(Transcript.ToolDefinition.self,
                                           from: Data(#"{"name":"t","description":"d","argumentsSchema":"{days: integer}"}"#.utf8))
        #expect(old.argumentsSchema == "{days: integer}" && old.parameters.debugDescription != old.argumentsSchema)
        let again = try JSONDecoder().decode(Transcript.ToolDefinition.self, from: try JSONEncoder().encode(shown))
        #expect(again == shown && again.parameters == TripIdea.generationSchema)
    }

    @Test func contextOptionsAndMetadata_iOS27Spellings() async throws {
        let session = LanguageModelSession(model: Self.tiny, instructions: "Plan trips.")
        let short = GenerationOptions(maximumResponseTokens: 3)
        let first = try await session.respond(to: "One", options: short, contextOptions: ContextOptions(includeSchemaInPrompt: false),
                                              metadata: ["user": "u1", "attempt": 2])
        guard case let .prompt(prompt)? = first.transcriptEntries.first else { Issue.record("no prompt entry"); return }
        #expect(prompt.metadata == ["user": "u1".generatedContent, "attempt": 2.generatedContent])
        // Metadata renders nothing: other metadata on the next turn reuses everything before it.
        let second = try await session.respond(to: "Two", options: short, metadata: ["user": "u2"])
        #expect(second.invalidation == nil && second.usage.input.cachedTokenCount > 0)
        var stream = session.streamResponse(to: "Three", options: short, contextOptions: ContextOptions(), metadata: ["user": "u3"])
        let streamed = try await stream.collect()
        guard case let .prompt(third)? = streamed.transcriptEntries.first else { Issue.record("no prompt entry"); return }
        #expect(third.metadata == ["user": "u3".generatedContent])
        stream = session.streamResponse(to: "Four", options: short)
        _ = try await stream.collect()

        // Schema in the prompt: iOS 26's argument when given, else the context options, else yes.
        let budget = GenerationOptions(maximumResponseTokens: 80)
        var counts: [Bool: Int] = [:]
        for (flag, context, included) in [(nil, nil, true), (nil, false, false), (true, false, true), (false, nil, false)] as [(Bool?, Bool?, Bool)] {
            let fresh = LanguageModelSession(model: Self.tiny, instructions: "Plan trips.")
            let response = try await fresh.respond(to: "A weekend idea", generating: TripIdea.self, includeSchemaInPrompt: flag,
                                                   options: budget, contextOptions: ContextOptions(includeSchemaInPrompt: context))
            guard case let .prompt(p)? = response.transcriptEntries.first else { Issue.record("no prompt entry"); return }
            #expect(p.responseFormat?.isIncludedInPrompt == included, "\(String(describing: flag)), \(String(describing: context))")
            let input = response.usage.input.totalTokenCount
            #expect(counts[included].map { $0 == input } ?? true)
            counts[included] = input
        }
        #expect(counts[true]! > counts[false]!)
    }

    @Test func transcriptMetadata_entriesKeepItAndReadBackWithIt() throws {
        let response = Transcript.Response(id: "r", metadata: ["source": "cache", "score": 0.5],
                                           segments: [.text(Transcript.TextSegment(content: "Hi."))])
        #expect(response.metadata == ["source": "cache".generatedContent, "score": 0.5.generatedContent] && response.text == "Hi.")
        let call = Transcript.ToolCall(id: "c", metadata: ["retry": true], toolName: "ForecastTool",
                                       arguments: GeneratedContent(properties: ["city": "Porto"]))
        #expect(call.metadata == ["retry": true.generatedContent])
        let transcript = Transcript(entries: [.prompt(.init(text: "Hi", metadata: ["k": [1, 2]])), .toolCalls(.init(id: "cs", [call])),
                                              .response(response)])
        let loaded = try JSONDecoder().decode(Transcript.self, from: try JSONEncoder().encode(transcript))
        #expect(loaded == transcript)
        // Entries saved before metadata existed read with none.
        let old = try JSONDecoder().decode(Transcript.ToolCall.self, from: Data(#"{"toolName":"t","arguments":"{}"}"#.utf8))
        #expect(old.metadata.isEmpty)
        #expect(try JSONDecoder().decode(Transcript.Response.self, from: Data(#"{"text":"x"}"#.utf8)).metadata.isEmpty)
    }

    @Test func observation_seesRespondingAndTranscriptChange() async throws {
        let session = LanguageModelSession(model: Self.tiny)
        let changes = ChangeCounter()
        // Weakly: the registrar keeps the last onChange until the session goes, and a strong
        // capture would keep the session alive through it (a cycle the sanitizer reports).
        @Sendable func track(_ observed: LanguageModelSession?) {
            guard let observed else { return }
            withObservationTracking { _ = observed.isResponding; _ = observed.transcript } onChange: { [weak observed] in
                changes.bump()
                track(observed)
            }
        }
        track(session)
        _ = try await session.respond(to: "Hi", options: GenerationOptions(maximumResponseTokens: 2))
        #expect(changes.count >= 3)   // responding on, the transcript, responding off
    }

    @Test func sessionPropertyEntry_customPropertiesLiveWithTheSession() async throws {
        let session = LanguageModelSession(profile: CountingProfile())
        let options = GenerationOptions(maximumResponseTokens: 2)
        let first = try await session.respond(to: "One", options: options)
        let second = try await session.respond(to: "Two", options: options)
        let third = try await session.respond(to: "Three", options: options)
        #expect(first.invalidation?.reason == .emptyCache && second.invalidation == nil)
        // Two responses seen: the body now takes the other instructions, from token 2 on.
        #expect(third.invalidation?.segment == .instructions(index: 0))
        #expect(session.transcript.entries.first.map { if case let .instructions(i) = $0 { i.texts } else { [] } } == ["Be brief now."])
        let other = LanguageModelSession(profile: CountingProfile())
        _ = try await other.respond(to: "One", options: options)
        #expect(other.transcript.entries.first.map { if case let .instructions(i) = $0 { i.texts } else { [] } } == ["Plan trips."],
                "each session has its own properties")
    }

    @Test func generableEnumWithValues_roundTripsAndDecodes() async throws {
        let values: [Activity] = [.walk(distance: 3), .rest(hours: 2, nap: true), .note("hi"), .idle]
        for v in values {
            let back = try Activity(GeneratedContent(json: v.generatedContent.jsonString))
            #expect(back.generatedContent == v.generatedContent)
        }
        for seed in 0 ..< 3 {
            let session = LanguageModelSession(model: Self.tiny)
            let options = GenerationOptions(samplingMode: .random(top: 30, seed: UInt64(seed)), maximumResponseTokens: 90)
            let plan = try await session.respond(to: "Plan my day", generating: DayPlan.self, options: options).content
            #expect((2 ... 3).contains(plan.activities.count))
        }
    }

    /// The JSON Foundation Models writes for such cases: `type` first, then the values, labeled
    /// ones by label and the others as `value`, `value1`; a `nil` optional left out.
    @Test func generableEnumWithValues_isWrittenWithTheCaseAsType() throws {
        let written: [(Edit, String)] = [
            (.insert(item: "milk", at: .index(2)), #"{"type":"insert","item":"milk","at":{"type":"index","value":2}}"#),
            (.move(.named("top"), to: .index(0)), #"{"type":"move","value":{"type":"named","value":"top"},"to":{"type":"index","value":0}}"#),
            (.swap(1, 2), #"{"type":"swap","value":1,"value1":2}"#),
            (.comment("ok"), #"{"type":"comment","value":"ok"}"#),
            (.comment(nil), #"{"type":"comment"}"#),
            (.clear, #"{"type":"clear"}"#),
        ]
        for (edit, json) in written {
            #expect(edit.generatedContent.jsonString == json)
            #expect(try Edit(GeneratedContent(json: json)) == edit)
        }
        #expect(try Edit(GeneratedContent(json: #"{"type":"comment","value":null}"#)) == .comment(nil))
        #expect(try Edit(GeneratedContent(json: #"{"value":1,"value1":2,"type":"swap"}"#)) == .swap(1, 2), "read by name, in any order")
        #expect(throws: GeneratedContentError.typeMismatch(expected: "one of insert, move, swap, comment, clear", found: "jump")) {
            try Edit(GeneratedContent(json: #"{"type":"jump"}"#))
        }
        #expect(throws: GeneratedContentError.missingProperty("type")) { try Edit(GeneratedContent(json: #"{"swap":{"_0":1}}"#)) }
        #expect(throws: GeneratedContentError.missingProperty("value1")) { try Edit(GeneratedContent(json: #"{"type":"swap","value":1}"#)) }
    }

    /// The schema is a choice of one structure per case, named `Enum.DiscriminatedCase`, whose
    /// first property is the case's name as the only string allowed.
    @Test func generableEnumWithValues_schemaHasAStructurePerCase() throws {
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(Edit.generationSchema)) as? [String: Any]
        let cases = try #require(json?["anyOf"] as? [[String: Any]])
        #expect(json?["title"] as? String == "Edit")
        #expect(cases.map { $0["title"] as? String } == ["Edit.DiscriminatedInsert", "Edit.DiscriminatedMove", "Edit.DiscriminatedSwap",
                                                          "Edit.DiscriminatedComment", "Edit.DiscriminatedClear"])
        #expect(cases.map { $0["x-order"] as? [String] ?? [] } == [["type", "item", "at"], ["type", "value", "to"], ["type", "value", "value1"],
                                                                    ["type", "value"], ["type"]])
        #expect(cases.map { $0["required"] as? [String] ?? [] } == [["type", "item", "at"], ["type", "value", "to"], ["type", "value", "value1"],
                                                                     ["type"], ["type"]])
        #expect(cases.map { ($0["properties"] as? [String: [String: Any]])?["type"]?["enum"] as? [String] ?? [] }
                == [["insert"], ["move"], ["swap"], ["comment"], ["clear"]])
        #expect(cases.allSatisfy { $0["description"] as? String == "One change to a list." })
    }

    /// Guided generation follows the form: whatever the sampler picks decodes, and its first
    /// property names a case whose values follow.
    @Test func generableEnumWithValues_generatesCasesNamedByType() async throws {
        var kinds = Set<String>()
        for seed in 0 ..< 6 {
            let session = LanguageModelSession(model: Self.tiny)
            let options = GenerationOptions(samplingMode: .random(top: 40, seed: UInt64(seed)), maximumResponseTokens: 80)
            let response = try await session.respond(to: "Change the list", generating: Edit.self, options: options)
            guard case let .structure(properties, keys) = response.rawContent.kind else {
                Issue.record("not a structure: \(response.rawContent.jsonString)")
                continue
            }
            #expect(keys.first == "type")
            kinds.insert(try #require(properties["type"]).value(String.self))
            #expect(try Edit(response.rawContent) == response.content)
            #expect(try Edit(GeneratedContent(json: response.content.generatedContent.jsonString)) == response.content)
        }
        #expect(kinds.count >= 2, "six samples keep to one case: \(kinds)")
    }

    /// Apple's pattern for `.required`: the session keeps calling tools until the profile, read
    /// again after each tool round, changes the mode; tool hooks write session properties.
    @Test func toolCallingMode_aProfileEndsRequiredCallsAfterItsHooksCountThem() async throws {
        let session = LanguageModelSession(profile: CallsUntilDone())
        let first = try await session.respond(to: "Weather?")
        #expect(first.transcriptEntries.map(\.kind) == ["prompt", "toolCalls", "toolOutput", "toolCalls", "toolOutput", "response"])
        // The count lives with the session: the next request starts disallowed and calls nothing.
        let second = try await session.respond(to: "And tomorrow?")
        #expect(second.transcriptEntries.map(\.kind) == ["prompt", "response"])
        let other = try await LanguageModelSession(profile: CallsUntilDone()).respond(to: "Weather?")
        #expect(other.transcriptEntries.filter { $0.kind == "toolCalls" }.count == 2, "each session counts its own calls")
    }

    @Test func profileToolHooks_seeEachCallAndOutput() async throws {
        let log = ChangeCounter()
        let session = LanguageModelSession(profile: ToolProfile(log: log))
        let response = try await session.respond(to: "Weather?")
        #expect(response.transcriptEntries.map(\.kind).prefix(3) == ["prompt", "toolCalls", "toolOutput"])
        let calls = response.transcriptEntries.filter { $0.kind == "toolCalls" }.count
        #expect(log.count == 2 * calls)
    }
}

extension LanguageModelSession.SessionPropertyValues {
    @SessionPropertyEntry var responsesSeen: Int = 0
    @SessionPropertyEntry var toolOutputsSeen: Int = 0
}

/// Requires tool calls until its hook has seen two outputs, then disallows them.
struct CallsUntilDone: DynamicProfile {
    @SessionProperty(\.toolOutputsSeen) var seen
    var body: some DynamicProfile {
        Profile { Instructions("Plan trips."); ForecastTool() }
            .model(AppleShapedClientTests.tiny)
            .onToolOutput { _ in seen += 1 }
            .toolCallingMode(seen < 2 ? .required : .disallowed)
            .maximumResponseTokens(40)
    }
}

struct CountingProfile: DynamicProfile {
    @SessionProperty(\.responsesSeen) var seen
    var body: some DynamicProfile {
        Profile {
            if seen >= 2 { Instructions("Be brief now.") } else { Instructions("Plan trips.") }
        }
        .model(AppleShapedClientTests.tiny)
        .onResponse { seen += 1 }
    }
}

/// App state that is not Sendable, as a view model often is.
final class TripFilter {
    var hidden: Set<String> = ["debug"]
}

struct ToolProfile: DynamicProfile {
    let log: ChangeCounter
    let filter = TripFilter()
    var body: some DynamicProfile {
        Profile { Instructions("Plan trips."); ForecastTool() }
            .model(AppleShapedClientTests.tiny)
            .historyTransform { history in history.filter { !filter.hidden.contains($0.kind) } }   // captures non-Sendable state
            .onToolCall { [log] call in if call.toolName == "ForecastTool" { log.bump() } }
            .onToolOutput { [log] output in if output.text.hasPrefix("Sunny") { log.bump() } }
            .toolCallingMode(log.count == 0 ? .required : .allowed)
            .maximumResponseTokens(30)
    }
}

final class ChangeCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    var count: Int { lock.withLock { value } }
    func bump() { lock.withLock { value += 1 } }
}
