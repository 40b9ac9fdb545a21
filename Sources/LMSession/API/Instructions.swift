/// Instructions that tell the model its role; the first segment of every request.
public struct Instructions: Sendable, Equatable, ExpressibleByStringLiteral, DynamicInstructions {
    /// The instruction text.
    public var text: String

    /// Instructions with `text`.
    public init(_ text: String) { self.text = text }

    /// Instructions from a string literal.
    public init(stringLiteral value: String) { self.text = value }

    /// Instructions built from several strings, joined by newlines.
    public init(@InstructionsBuilder _ content: () -> [String]) { self.text = content().joined(separator: "\n") }

    /// The components this contributes: one text.
    public func components() -> [InstructionComponent] { [.text(text)] }
}

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

/// A user prompt. Expressible by a string literal, as in `prewarm(promptPrefix: "Suggest a recipe using")`.
public struct Prompt: Sendable, Equatable, ExpressibleByStringLiteral {
    /// The prompt text.
    public var text: String

    /// A prompt with `text`.
    public init(_ text: String) { self.text = text }

    /// A prompt from a string literal.
    public init(stringLiteral value: String) { self.text = value }
}
