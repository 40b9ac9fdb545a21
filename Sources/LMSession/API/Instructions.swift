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
