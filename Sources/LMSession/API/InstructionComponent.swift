/// One piece of resolved instructions: a text or a tool, in declaration order.
public enum InstructionComponent: Sendable {
    /// Instruction text.
    case text(String)
    /// A tool offered to the model.
    case tool(any Tool)
}
