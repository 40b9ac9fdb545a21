/// Why generated content could not be read as a type, or JSON could not be read as content.
public enum GeneratedContentError: Error, Equatable, CustomStringConvertible {
    /// The content has another shape than the type needs.
    case typeMismatch(expected: String, found: String)
    /// A structure lacks a property the type needs.
    case missingProperty(String)
    /// A number is out of the type's range or not whole where the type needs an integer.
    case numberNotRepresentable(Double, type: String)
    /// The JSON text is malformed at `offset` (in UTF-8 bytes).
    case invalidJSON(offset: Int, reason: String)

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case let .typeMismatch(expected, found): "expected \(expected), found \(found)"
        case let .missingProperty(name): "the structure has no property '\(name)'"
        case let .numberNotRepresentable(value, type): "\(value) cannot be represented as \(type)"
        case let .invalidJSON(offset, reason): "invalid JSON at byte \(offset): \(reason)"
        }
    }
}
