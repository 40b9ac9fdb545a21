/// Dynamic instructions with nothing in them: no text, no tools.
public struct EmptyDynamicInstructions: DynamicInstructions, Sendable {
    /// Empty instructions.
    public init() {}

    /// No components.
    public func components() -> [InstructionComponent] { [] }
}
