/// A value that can be part of a prompt.
public protocol PromptRepresentable {
    /// The value as a prompt.
    var promptRepresentation: Prompt { get }
}
