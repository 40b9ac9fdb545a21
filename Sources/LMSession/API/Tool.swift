/// A function the model can call while it responds.
///
/// The session offers each tool's name, description and arguments schema in the
/// instructions. When the model writes a call in the prompt format's call syntax
/// (`<|tool_call|>` name, a space, the arguments, `<|end|>`), the session records a
/// `toolCalls` entry, runs ``call(arguments:)``, records a `toolOutput` entry, and
/// lets the model continue its response.
public protocol Tool: Sendable, DynamicInstructions {
    /// A unique name the model uses to call the tool.
    var name: String { get }
    /// What the tool does, for the model.
    var description: String { get }
    /// The arguments the tool takes, described as text (a JSON schema, for example).
    var argumentsSchema: String { get }
    /// Runs the tool.
    /// - Parameter arguments: the arguments text the model wrote.
    /// - Returns: the output the model will read.
    func call(arguments: String) async throws -> String
}

extension Tool {
    /// The components this contributes: the tool itself.
    public func components() -> [InstructionComponent] { [.tool(self)] }

    /// The definition the model sees.
    public var definition: Transcript.ToolDefinition {
        Transcript.ToolDefinition(name: name, description: description, argumentsSchema: argumentsSchema)
    }
}
