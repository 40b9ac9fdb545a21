/// A sequence of instructions and tools, the result of a builder block.
public struct InstructionGroup: DynamicInstructions {
    let parts: [InstructionComponent]
    /// The components, in order.
    public func components() -> [InstructionComponent] { parts }
}
