/// Builds ``DynamicInstructions`` from instructions, tools, conditionals and loops.
@resultBuilder
public enum DynamicInstructionsBuilder {
    /// Any dynamic instructions (instructions, a tool, an array of tools, ...).
    public static func buildExpression(_ content: some DynamicInstructions) -> InstructionGroup {
        InstructionGroup(parts: content.components())
    }
    /// An array of tools of mixed types.
    public static func buildExpression(_ tools: [any Tool]) -> InstructionGroup {
        InstructionGroup(parts: tools.map(InstructionComponent.tool))
    }
    /// A plain string is an instruction text.
    public static func buildExpression(_ text: String) -> InstructionGroup { InstructionGroup(parts: [.text(text)]) }
    /// Items in declaration order.
    public static func buildBlock(_ parts: InstructionGroup...) -> InstructionGroup {
        InstructionGroup(parts: parts.flatMap(\.parts))
    }
    /// An `if` without `else`.
    public static func buildOptional(_ part: InstructionGroup?) -> InstructionGroup { part ?? InstructionGroup(parts: []) }
    /// The `if` branch.
    public static func buildEither(first: InstructionGroup) -> InstructionGroup { first }
    /// The `else` branch.
    public static func buildEither(second: InstructionGroup) -> InstructionGroup { second }
    /// A `for` loop.
    public static func buildArray(_ parts: [InstructionGroup]) -> InstructionGroup {
        InstructionGroup(parts: parts.flatMap(\.parts))
    }
    /// `if #available`.
    public static func buildLimitedAvailability(_ part: InstructionGroup) -> InstructionGroup { part }
}
