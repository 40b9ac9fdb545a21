import Foundation

/// The identifier of a transcript entry: a fresh UUID string unless one is given, saved
/// with the entry, and read back as a fresh one when a saved entry has none.
///
/// Identifiers do not take part in equality: two entries with the same content are equal,
/// which is what the session's reuse and the tests compare.
@propertyWrapper
public struct EntryIdentity: Sendable, Hashable, Codable {
    /// The identifier.
    public var wrappedValue: String

    /// An identifier (a new UUID string by default).
    public init(wrappedValue: String = UUID().uuidString) { self.wrappedValue = wrappedValue }

    /// Always equal: identity is not content.
    public static func == (a: EntryIdentity, b: EntryIdentity) -> Bool { true }
    /// Contributes nothing to a hash, consistently with `==`.
    public func hash(into hasher: inout Hasher) {}

    /// Reads the identifier string.
    public init(from decoder: any Decoder) throws { wrappedValue = try decoder.singleValueContainer().decode(String.self) }
    /// Writes the identifier string.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(wrappedValue)
    }
}

extension KeyedDecodingContainer {
    /// An entry read from a transcript saved without identifiers gets a fresh one.
    public func decode(_ type: EntryIdentity.Type, forKey key: Key) throws -> EntryIdentity {
        try decodeIfPresent(type, forKey: key) ?? EntryIdentity()
    }
}
