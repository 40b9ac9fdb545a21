/// Builds a ``Prompt`` from strings and other prompt-representable values, one per line; a
/// ``Generable`` value renders as its JSON.
@resultBuilder
public enum PromptBuilder {
    /// One value.
    public static func buildExpression(_ value: some PromptRepresentable) -> [String] { [value.promptRepresentation.text] }
    /// A prompt.
    public static func buildExpression(_ prompt: Prompt) -> [String] { [prompt.text] }
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
    /// The prompt: the lines joined by newlines.
    public static func buildFinalResult(_ lines: [String]) -> Prompt { Prompt(lines.joined(separator: "\n")) }
}

extension Prompt: PromptRepresentable {
    /// Itself.
    public var promptRepresentation: Prompt { self }

    /// A prompt built from lines.
    public init(@PromptBuilder _ content: () throws -> Prompt) rethrows { self = try content() }
}

extension Instructions: InstructionsRepresentable {
    /// Itself.
    public var instructionsRepresentation: Instructions { self }
}
