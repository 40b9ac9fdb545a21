/// A type that can be written as ``GeneratedContent``; such values can go into prompts and
/// instructions, where they render as JSON.
public protocol ConvertibleToGeneratedContent: PromptRepresentable, InstructionsRepresentable {
    /// The value as generated content.
    var generatedContent: GeneratedContent { get }
}

extension ConvertibleToGeneratedContent {
    /// The value's JSON, as a prompt.
    public var promptRepresentation: Prompt { Prompt(generatedContent.jsonString) }
    /// The value's JSON, as instructions.
    public var instructionsRepresentation: Instructions { Instructions(generatedContent.jsonString) }
}
