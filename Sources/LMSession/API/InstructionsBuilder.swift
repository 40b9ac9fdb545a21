/// Collects strings into ``Instructions``.
@resultBuilder
public enum InstructionsBuilder {
    /// One line.
    public static func buildExpression(_ text: String) -> [String] { [text] }
    /// Lines in order.
    public static func buildBlock(_ parts: [String]...) -> [String] { parts.flatMap { $0 } }
    /// An `if` without `else`.
    public static func buildOptional(_ part: [String]?) -> [String] { part ?? [] }
    /// The `if` branch.
    public static func buildEither(first: [String]) -> [String] { first }
    /// The `else` branch.
    public static func buildEither(second: [String]) -> [String] { second }
    /// A `for` loop.
    public static func buildArray(_ parts: [[String]]) -> [String] { parts.flatMap { $0 } }
}
