import Foundation
import LMRuntime
import Synchronization

/// A language model a session can run.
public protocol LanguageModel: Sendable {
    /// Loads (once) and returns the model's weights and tokenizer.
    func loaded() throws -> LoadedModel

    /// What the model can do; a request needing something else throws
    /// ``LanguageModelError/unsupportedCapability(_:)`` before computing anything. Default:
    /// guided generation and tool calling (what every model here does through the session's
    /// constrained decoder), and reasoning (``ContextOptions/reasoningLevel``).
    var capabilities: LanguageModelCapabilities { get }
}

extension LanguageModel {
    /// Guided generation, tool calling and reasoning.
    public var capabilities: LanguageModelCapabilities { LanguageModelCapabilities([.guidedGeneration, .toolCalling, .reasoning]) }

    /// The context window, in tokens (0 when the model cannot be loaded; see
    /// ``SystemLanguageModel/availability``).
    public var contextSize: Int { (try? loaded().weights.config.contextLength) ?? 0 }

    /// How many tokens `text` takes (without BOS), as a prompt segment would.
    public func tokenCount(for text: String) throws -> Int { try renderer().text(text).count }

    /// How many tokens a prompt takes where a session renders it: `<|user|> text <|end|>`, with the
    /// vocabulary's own turn markers.
    public func tokenCount(for prompt: Prompt) async throws -> Int {
        let renderer = try renderer()
        return renderer.user.count + renderer.text(prompt.text).count + renderer.userClose.count
    }

    /// How many tokens instructions take as the first segment of a request: `BOS <|system|> text <|end|>`.
    public func tokenCount(for instructions: Instructions) async throws -> Int {
        let renderer = try renderer()
        var out = RenderedPrompt()
        renderer.renderInstructions([.text(instructions.text)], into: &out)
        return out.tokens.count
    }

    /// How many tokens tool definitions add to the instructions (with whatever the vocabulary's
    /// layout writes around them, e.g. Mistral's `[AVAILABLE_TOOLS]`).
    public func tokenCount(for tools: [any Tool]) async throws -> Int {
        let renderer = try renderer()
        var with = RenderedPrompt(), without = RenderedPrompt()
        renderer.renderInstructions(tools.map(InstructionComponent.tool), into: &with)
        renderer.renderInstructions([], into: &without)
        return with.tokens.count - without.tokens.count
    }

    /// How many tokens a schema takes where a guided request renders it after its prompt.
    public func tokenCount(for schema: GenerationSchema) async throws -> Int {
        try renderer().schemaTokens(.init(schema: schema)).count
    }

    /// How many tokens transcript entries take as history.
    public func tokenCount(for entries: some Collection<Transcript.Entry>) async throws -> Int {
        let renderer = try renderer()
        var out = RenderedPrompt()
        for (i, entry) in entries.enumerated() { renderer.renderEntry(entry, index: i, into: &out) }
        return out.tokens.count
    }

    /// The renderer sessions on this model use, sharing the ids of texts they rendered: counting a
    /// transcript a session has sent encodes nothing again, and what it encodes serves the next request.
    private func renderer() throws -> PromptRenderer {
        let model = try loaded()
        return PromptRenderer(tokenizer: model.tokenizer, texts: model.texts)
    }
}
