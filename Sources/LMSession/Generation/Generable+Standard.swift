import Foundation

extension String: Generable {
    /// Any string.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .string(choices: nil, pattern: nil)) }
    /// Reads a string.
    public init(_ content: GeneratedContent) throws {
        guard case let .string(s) = content.kind else { throw GeneratedContentError.typeMismatch(expected: "a string", found: content.kindName) }
        self = s
    }
    /// The string.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .string(self)) }
    /// The text itself (not quoted as JSON).
    public var promptRepresentation: Prompt { Prompt(self) }
    /// The text itself (not quoted as JSON).
    public var instructionsRepresentation: Instructions { Instructions(self) }
}

extension Bool: Generable {
    /// `true` or `false`.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .boolean) }
    /// Reads a Boolean.
    public init(_ content: GeneratedContent) throws {
        guard case let .bool(b) = content.kind else { throw GeneratedContentError.typeMismatch(expected: "a Boolean", found: content.kindName) }
        self = b
    }
    /// The Boolean.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .bool(self)) }
}

extension Int: Generable {
    /// Any integer.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .number(minimum: nil, maximum: nil, integral: true)) }
    /// Reads a whole number that fits.
    public init(_ content: GeneratedContent) throws {
        let n = try Double.number(content)
        guard n == n.rounded(), let i = Int(exactly: n) else { throw GeneratedContentError.numberNotRepresentable(n, type: "Int") }
        self = i
    }
    /// The integer.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .number(Double(self))) }
}

extension Double: Generable {
    /// Any number.
    public static var generationSchema: GenerationSchema { GenerationSchema(root: .number(minimum: nil, maximum: nil, integral: false)) }
    /// Reads a number.
    public init(_ content: GeneratedContent) throws { self = try Self.number(content) }
    /// The number.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .number(self)) }

    static func number(_ content: GeneratedContent) throws -> Double {
        guard case let .number(n) = content.kind else { throw GeneratedContentError.typeMismatch(expected: "a number", found: content.kindName) }
        return n
    }
}

extension Float: Generable {
    /// Any number.
    public static var generationSchema: GenerationSchema { Double.generationSchema }
    /// Reads a number.
    public init(_ content: GeneratedContent) throws { self = Float(try Double.number(content)) }
    /// The number.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .number(Double(self))) }
}

extension Decimal: Generable {
    /// Any number.
    public static var generationSchema: GenerationSchema { Double.generationSchema }
    /// Reads a number (through its shortest decimal text, so 0.1 reads as 0.1).
    public init(_ content: GeneratedContent) throws {
        let n = try Double.number(content)
        self = Decimal(string: "\(n)") ?? Decimal(n)
    }
    /// The number.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .number(doubleValue)) }
}

extension Array: Generable where Element: Generable {
    /// Partial arrays hold the elements' partial forms.
    public typealias PartiallyGenerated = [Element.PartiallyGenerated]
    /// An array of the element's schema.
    public static var generationSchema: GenerationSchema {
        let element = Element.generationSchema
        return GenerationSchema(root: .array(element: element.root, minimumCount: nil, maximumCount: nil), problem: element.problem)
    }
}

extension Array: ConvertibleToGeneratedContent, PromptRepresentable, InstructionsRepresentable where Element: ConvertibleToGeneratedContent {
    /// The elements' contents.
    public var generatedContent: GeneratedContent { GeneratedContent(kind: .array(map(\.generatedContent))) }
}

extension Array: ConvertibleFromGeneratedContent where Element: ConvertibleFromGeneratedContent {
    /// Reads each element.
    public init(_ content: GeneratedContent) throws {
        guard case let .array(elements) = content.kind else { throw GeneratedContentError.typeMismatch(expected: "an array", found: content.kindName) }
        self = try elements.map(Element.init)
    }
}

extension Optional: ConvertibleFromGeneratedContent where Wrapped: ConvertibleFromGeneratedContent {
    /// `nil` for null, the wrapped value otherwise.
    public init(_ content: GeneratedContent) throws {
        self = content.kind == .null ? nil : try Wrapped(content)
    }
}

extension Optional: ConvertibleToGeneratedContent, PromptRepresentable, InstructionsRepresentable where Wrapped: ConvertibleToGeneratedContent {
    /// Null for `nil`, the wrapped value's content otherwise.
    public var generatedContent: GeneratedContent { self?.generatedContent ?? GeneratedContent(kind: .null) }
}

extension GeneratedContent: Generable {
    /// Content reads as itself.
    public init(_ content: GeneratedContent) throws { self = content }
    /// Itself.
    public var generatedContent: GeneratedContent { self }
    /// Any string: content generated without a schema is text.
    public static var generationSchema: GenerationSchema { String.generationSchema }
}
