/// A function the model can call while it responds, in FoundationModels' shape: typed
/// ``Arguments`` (usually a `@Generable` struct) and an ``Output`` that goes back to the model.
///
/// The session offers each tool's name, description and (when
/// ``includesSchemaInInstructions``) its ``parameters`` schema in the instructions, in
/// declaration order. When the model opens a call (`<|tool_call|>`), the rest of the call is
/// decoded under a grammar: one of the offered names, then arguments that are a valid
/// instance of that tool's schema, whatever the model. The session records a `toolCalls`
/// entry, runs ``call(arguments:)``, records a `toolOutput` entry with the output's prompt
/// text, and lets the model continue.
public protocol Tool<Arguments, Output>: Sendable, DynamicInstructions {
    /// What the model writes to call the tool.
    associatedtype Arguments: ConvertibleFromGeneratedContent
    /// What the tool returns to the model.
    associatedtype Output: PromptRepresentable
    /// A unique name the model uses to call the tool (default: the type's name).
    var name: String { get }
    /// What the tool does, for the model.
    var description: String { get }
    /// The schema of ``Arguments`` (default: `Arguments.generationSchema` for a generable type).
    var parameters: GenerationSchema { get }
    /// Whether the instructions show the parameters schema (default `true`).
    var includesSchemaInInstructions: Bool { get }
    /// Runs the tool.
    func call(arguments: Arguments) async throws -> Output
}

extension Tool {
    /// The type's name.
    public var name: String { String(describing: Self.self) }
    /// `true`.
    public var includesSchemaInInstructions: Bool { true }
    /// The components this contributes: the tool itself.
    public func components() -> [InstructionComponent] { [.tool(self)] }

    /// The definition the model sees.
    public var definition: Transcript.ToolDefinition {
        Transcript.ToolDefinition(tool: self)
    }

    /// Reads the arguments from `content` and runs the tool; the output as prompt text.
    func run(_ content: GeneratedContent) async throws -> String {
        let arguments = try Arguments(content)
        return try await call(arguments: arguments).promptRepresentation.text
    }
}

extension Tool where Arguments: Generable {
    /// The arguments type's schema.
    public var parameters: GenerationSchema { Arguments.generationSchema }
}
