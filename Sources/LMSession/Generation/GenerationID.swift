import Foundation

/// Identifies one generated value across the snapshots of a streamed response, so a view can
/// tell "the same item, more complete" from "a new item".
public struct GenerationID: Sendable, Hashable, Codable {
    let value: UUID

    /// A new, unique identifier.
    public init() { value = UUID() }
}
