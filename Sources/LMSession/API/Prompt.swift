/// A user prompt. Expressible by a string literal, as in `prewarm(promptPrefix: "Suggest a recipe using")`.
public struct Prompt: Sendable, Equatable, ExpressibleByStringLiteral {
    /// The prompt text.
    public var text: String

    /// A prompt with `text`.
    public init(_ text: String) { self.text = text }

    /// A prompt from a string literal.
    public init(stringLiteral value: String) { self.text = value }
}
