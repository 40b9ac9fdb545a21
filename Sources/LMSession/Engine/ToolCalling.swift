import Foundation
import LMRuntime

/// Everything about constrained decoding for one request in one place: the grammar of a
/// structured response and the grammar of tool calls, lent from the model's cache for the
/// request's duration, and running the tools the model calls.
struct Guidance {
    let engine: SessionEngine
    let format: Transcript.ResponseFormat?
    private let structured: (TokenMasker, key: String)?
    private let calls: (TokenMasker, key: String)?

    /// Borrows the grammars `format` and the offered `tools` need.
    /// - Throws: ``LanguageModelError/unsupportedGenerationGuide(_:)`` for a schema the decoder cannot
    ///   follow (named for a response format, unnamed for the tools' arguments),
    ///   ``LanguageModelError/invalidOptions(option:reason:)`` for `.required` without tools.
    init(format: Transcript.ResponseFormat?, tools: [any Tool], mode: GenerationOptions.ToolCallingMode, engine: SessionEngine) throws {
        self.engine = engine
        self.format = format
        let grammars = engine.model.grammars
        let structured: (TokenMasker, key: String)?
        do { structured = try format.map { try grammars.take($0.schema) } } catch let error as GenerationSchema.SchemaError {
            throw LanguageModelError.unsupportedGenerationGuide(.init(schemaName: format?.name, schemaError: error))
        }
        do {
            let offersCalls = !tools.isEmpty && mode != .disallowed
            calls = offersCalls ? try grammars.take(toolCalls: tools.map { ($0.name, $0.parameters) }, format: engine.renderer.callFormat) : nil
        } catch let error as GenerationSchema.SchemaError {
            if let structured { grammars.giveBack(structured.0, key: structured.key) }   // keep it cached
            throw LanguageModelError.unsupportedGenerationGuide(.init(schemaName: nil, schemaError: error))
        }
        self.structured = structured
        if mode == .required, calls == nil {
            giveBack()
            throw LanguageModelError.invalidOptions(option: "toolCallingMode", reason: ".required needs at least one tool")
        }
    }

    /// Returns the grammars to the model's cache.
    func giveBack() {
        if let structured { engine.model.grammars.giveBack(structured.0, key: structured.key) }
        if let calls { engine.model.grammars.giveBack(calls.0, key: calls.key) }
    }

    /// `decoding` constrained for tool round `round` under `mode`: the structured response's
    /// guide (checked against the budget), a fresh tool-call guide (none when disallowed, none
    /// under `.allowed` once ``LanguageModelSession/maximumToolRounds`` rounds have called), and
    /// whether the round must open with a call.
    func constrain(_ decoding: Decoding, round: Int, mode: GenerationOptions.ToolCallingMode) throws -> Decoding {
        var d = decoding
        if let structured, round == 0 {
            let guide = GuidedDecoder(masker: structured.0, stopToken: engine.renderer.end)
            if let budget = d.budget, budget < guide.remaining {
                throw LanguageModelError.invalidOptions(
                    option: "maximumResponseTokens", reason: "\(budget) cannot hold the shortest valid \(format!.name) (\(guide.remaining) tokens)")
            }
            d.guide = guide
        }
        // `.required` offers a call every round, as Apple documents it: the session keeps calling
        // until a tool throws, the profile changes the mode or the window fills. Under `.allowed`
        // the round after the last one offers none: its response must be the answer.
        let offersCall = mode == .required || (mode == .allowed && round < LanguageModelSession.maximumToolRounds)
        d.toolCall = offersCall ? calls.map { GuidedDecoder(masker: $0.0, stopToken: engine.renderer.callEnd) } : nil
        d.requiresToolCall = mode == .required && d.toolCall != nil
        // A required call opens at once and must close within the budget: its opening marker (if
        // it has one), the shortest call the grammar allows, the end marker.
        let markers = engine.renderer.callMarkerCount
        if d.requiresToolCall, let budget = d.budget, let shortest = d.toolCall?.remaining, budget < markers + shortest {
            throw LanguageModelError.invalidOptions(
                option: "maximumResponseTokens", reason: "\(budget) cannot hold the shortest tool call (\(markers + shortest) tokens), which .required asks for")
        }
        return d
    }

    /// The content generated so far, for a streamed snapshot: the text, or the partial value.
    func partialContent(_ tokens: [Int]) -> GeneratedContent? {
        let tokenizer = engine.model.tokenizer
        guard format != nil else {
            return GeneratedContent(kind: .string(LanguageModelSession.text(tokens, tokenizer)), isComplete: false)
        }
        return (try? GeneratedContent.partial(json: tokens.flatMap { tokenizer.bytes(of: $0, after: nil) })) ?? nil
    }

    /// The finished content: the structured value (with its transcript segment) or the text.
    func content(_ text: String) throws -> (GeneratedContent, Transcript.StructuredSegment?) {
        guard let format else { return (GeneratedContent(kind: .string(text)), nil) }
        do {
            let raw = try GeneratedContent(wholeJSON: text)
            return (raw, .init(source: format.name, content: raw))
        } catch let error as GeneratedContentError {
            throw LanguageModelError.decodingFailure(error)
        }
    }
}

extension LanguageModelSession {
    /// Tool rounds one response may take under `.allowed` before the session stops offering more
    /// (Apple's documentation names no limit; this one keeps a small model that calls again and
    /// again from filling the window). `.required` has none: it calls until a tool throws, the
    /// mode changes or the window is full.
    static let maximumToolRounds = 4

    /// A call the model wrote: parsed, passed through `onToolCall`, run, its output passed
    /// through `onToolOutput`; returns the two transcript entries it adds.
    func callTool(_ tokens: [Int], profile: Profile, tools: [any Tool], renderer: PromptRenderer) async throws -> [Transcript.Entry] {
        let call = try Self.parseCall(tokens, renderer: renderer)
        try await run(profile.toolCallHooks) { try await $0(call) }
        let output = Transcript.ToolOutput(toolName: call.toolName, text: try await runTool(call, offered: tools))
        try await run(profile.toolOutputHooks) { try await $0(output) }
        return [.toolCalls(.init(calls: [call], tokenIDs: tokens, assetIDs: [renderer.assetID])), .toolOutput(output)]
    }

    func runTool(_ call: Transcript.ToolCall, offered: [any Tool]) async throws -> String {
        guard let tool = offered.first(where: { $0.name == call.toolName }) else {
            throw LanguageModelError.toolCallFailed(toolName: call.toolName, reason: "no such tool is offered")
        }
        do { return try await tool.run(call.arguments) } catch {
            throw ToolCallError(tool: tool, underlyingError: error)
        }
    }

    /// `<|tool_call|> name arguments <|end|>`, `<tool_call>{"name":…,"arguments":…}</tool_call>`,
    /// `{"name":…,"parameters":…}<|eot_id|>` or `[TOOL_CALLS][{"name":…,"arguments":…}]</s>` → a call (the arguments are JSON, as the
    /// grammar wrote them).
    static func parseCall(_ tokens: [Int], renderer: PromptRenderer) throws -> Transcript.ToolCall {
        let body = renderer.tokenizer.decode(Array(tokens.dropFirst(renderer.callOpensWithJSON ? 0 : 1).dropLast()))
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let name: String, arguments: String
        if let key = renderer.callFormat.argumentsKey {
            var call: GeneratedContent
            do { call = try GeneratedContent(wholeJSON: body) } catch {
                throw LanguageModelError.toolCallFailed(toolName: "", reason: "the call is not a JSON object: \(error)")
            }
            if renderer.callFormat == .toolCallsList {   // Mistral's list of calls: the grammar writes one
                guard case let .array(elements) = call.kind, elements.count == 1 else {
                    throw LanguageModelError.toolCallFailed(toolName: "", reason: "the call is not a list of one JSON object")
                }
                call = elements[0]
            }
            guard case let .structure(properties, _) = call.kind, case let .string(named)? = properties["name"]?.kind else {
                throw LanguageModelError.toolCallFailed(toolName: "", reason: "the call names no tool")
            }
            (name, arguments) = (named, properties[key]?.jsonString ?? "null")
        } else {
            let parts = body.split(separator: " ", maxSplits: 1)
            guard let first = parts.first else { throw LanguageModelError.toolCallFailed(toolName: "", reason: "the call names no tool") }
            (name, arguments) = (String(first), parts.count > 1 ? String(parts[1]) : "null")
        }
        do {
            return Transcript.ToolCall(toolName: name, arguments: try GeneratedContent(wholeJSON: arguments))
        } catch {
            throw LanguageModelError.toolCallFailed(toolName: name, reason: "its arguments are not JSON: \(error)")
        }
    }

}
