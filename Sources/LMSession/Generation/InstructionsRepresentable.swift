/// A value that can be part of instructions.
public protocol InstructionsRepresentable {
    /// The value as instructions.
    var instructionsRepresentation: Instructions { get }
}
