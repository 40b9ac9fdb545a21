/// A structured value as the model generated it: null, a Boolean, a number, a string, an
/// array, or a structure whose properties keep the order they were generated in.
///
/// The currency of guided generation: ``Generable`` types convert from and to it, a streamed
/// structured response yields partial instances of it (``isComplete`` false), and
/// ``jsonString`` is exactly the JSON the model wrote.
public struct GeneratedContent: Sendable, Equatable, CustomDebugStringConvertible {
    /// The shape and value of generated content.
    public enum Kind: Sendable, Equatable {
        /// JSON `null`.
        case null
        /// A Boolean.
        case bool(Bool)
        /// A number (integers are whole doubles).
        case number(Double)
        /// A string.
        case string(String)
        /// An array of values.
        case array([GeneratedContent])
        /// Properties by name, and their names in order.
        case structure(properties: [String: GeneratedContent], orderedKeys: [String])
    }

    /// The value.
    public var kind: Kind
    /// Identifies the value across streamed snapshots, when it has an identity.
    public var id: GenerationID?
    /// Whether the value is whole: `false` for the part of a streamed value generated so far
    /// (an unclosed string, array or structure, and everything containing one).
    public internal(set) var isComplete: Bool

    /// Content of `kind`.
    public init(kind: Kind, id: GenerationID? = nil) {
        self.kind = kind
        self.id = id
        isComplete = true
    }

    init(kind: Kind, isComplete: Bool) {
        self.kind = kind
        self.isComplete = isComplete
    }

    /// The content of another value.
    public init(_ value: some ConvertibleToGeneratedContent) {
        self = value.generatedContent
    }

    /// The content of another value, with an identifier.
    public init(_ value: some ConvertibleToGeneratedContent, id: GenerationID) {
        self = value.generatedContent
        self.id = id
    }

    /// An array of the elements' contents.
    public init<S: Sequence>(elements: S, id: GenerationID? = nil) where S.Element == any ConvertibleToGeneratedContent {
        self.init(kind: .array(elements.map(\.generatedContent)), id: id)
    }

    /// A structure with `properties` in the order given (for a ``Generable`` type, the order
    /// of its schema). A repeated name keeps its last value at its first position.
    public init(properties: KeyValuePairs<String, any ConvertibleToGeneratedContent>, id: GenerationID? = nil) {
        var values: [String: GeneratedContent] = [:], order: [String] = []
        for (name, value) in properties {
            if values.updateValue(value.generatedContent, forKey: name) == nil { order.append(name) }
        }
        self.init(kind: .structure(properties: values, orderedKeys: order), id: id)
    }

    /// A structure with `properties` in the order given; a name that comes again keeps its
    /// first position and takes what `combine` makes of its value so far and the new one.
    public init<S: Sequence>(properties: S, id: GenerationID? = nil,
                             uniquingKeysWith combine: (GeneratedContent, GeneratedContent) throws -> some ConvertibleToGeneratedContent) rethrows
        where S.Element == (String, any ConvertibleToGeneratedContent) {
        var values: [String: GeneratedContent] = [:], order: [String] = []
        for (name, value) in properties {
            if let earlier = values[name] {
                values[name] = try combine(earlier, value.generatedContent).generatedContent
            } else {
                values[name] = value.generatedContent
                order.append(name)
            }
        }
        self.init(kind: .structure(properties: values, orderedKeys: order), id: id)
    }

    /// Equal when the values are equal (identifiers are not compared).
    public static func == (a: GeneratedContent, b: GeneratedContent) -> Bool {
        a.kind == b.kind && a.isComplete == b.isComplete
    }

    /// The JSON text.
    public var debugDescription: String { jsonString }

    /// The content as a `Value`.
    /// - Throws: ``GeneratedContentError`` when it does not have `Value`'s shape.
    public func value<Value: ConvertibleFromGeneratedContent>(_ type: Value.Type = Value.self) throws -> Value {
        try Value(self)
    }

    /// The property `property` of a structure, as a `Value`.
    /// - Throws: ``GeneratedContentError/missingProperty(_:)`` when there is no such property,
    ///   ``GeneratedContentError/typeMismatch(expected:found:)`` when this is not a structure or the
    ///   property does not have `Value`'s shape.
    public func value<Value: ConvertibleFromGeneratedContent>(_ type: Value.Type = Value.self,
                                                               forProperty property: String) throws -> Value {
        guard case let .structure(properties, _) = kind else {
            throw GeneratedContentError.typeMismatch(expected: "a structure with property '\(property)'", found: kindName)
        }
        guard let value = properties[property] else { throw GeneratedContentError.missingProperty(property) }
        return try Value(value)
    }

    /// The property `property` of a structure as a `Value`, or `nil` when it is absent or null.
    public func value<Value: ConvertibleFromGeneratedContent>(_ type: Value?.Type = Value?.self,
                                                               forProperty property: String) throws -> Value? {
        guard case let .structure(properties, _) = kind else {
            throw GeneratedContentError.typeMismatch(expected: "a structure with property '\(property)'", found: kindName)
        }
        guard let value = properties[property], value.kind != .null else { return nil }
        return try Value(value)
    }

    /// A word for the kind, for error messages.
    var kindName: String {
        switch kind {
        case .null: "null"
        case .bool: "a Boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .structure: "a structure"
        }
    }
}
