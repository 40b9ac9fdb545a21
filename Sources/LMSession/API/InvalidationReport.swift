/// Where and why a request stopped reusing the KV cache.
public struct InvalidationReport: Sendable, Equatable, CustomStringConvertible {
    /// Why cached tokens were not reused.
    public enum Reason: String, Sendable, Equatable {
        /// The rendered tokens differ from the cached ones at ``InvalidationReport/position``.
        case prefixChanged
        /// The cache held nothing (a new or rehydrated session).
        case emptyCache
        /// The active profile changed: the session deliberately starts over.
        case profileSwitch
    }

    /// A part of the rendered request.
    public enum Segment: Sendable, Equatable, CustomStringConvertible {
        /// Instruction text number `index` (0-based, declaration order).
        case instructions(index: Int)
        /// The definition of the tool with this name.
        case toolDefinition(name: String)
        /// History entry number `index` (0-based, after the instructions) of the given kind.
        case transcriptEntry(index: Int, kind: String)
        /// The new prompt.
        case prompt
        /// The marker that opens the response.
        case responseHeader
        /// The schema text of a guided-generation request (`includeSchemaInPrompt: true`),
        /// rendered after the new prompt.
        case responseSchema(name: String)

        /// A short phrase naming the segment.
        public var description: String {
            switch self {
            case let .instructions(index): "instructions (text \(index))"
            case let .toolDefinition(name): "tool definition '\(name)'"
            case let .transcriptEntry(index, kind): "transcript entry \(index) (\(kind))"
            case .prompt: "the new prompt"
            case .responseHeader: "the response header"
            case let .responseSchema(name): "the response schema '\(name)'"
            }
        }
    }

    /// The first recomputed token position.
    public var position: Int
    /// The segment that position falls in.
    public var segment: Segment
    /// Why the cache was not reused from there on.
    public var reason: Reason
    /// Cached tokens thrown away.
    public var discardedTokenCount: Int
    /// Tokens from ``position`` on that were not recomputed but restored from the model's shared
    /// prefix store: from its memory, and from its disk tier.
    public var restoredFromSharedStoreCount = 0, restoredFromDiskCount = 0

    /// The first position actually computed.
    public var recomputedFrom: Int { position + restoredFromSharedStoreCount + restoredFromDiskCount }

    /// A report of a cache lost from `position` on, with nothing restored.
    public init(position: Int, segment: Segment, reason: Reason, discardedTokenCount: Int) {
        self.position = position
        self.segment = segment
        self.reason = reason
        self.discardedTokenCount = discardedTokenCount
    }

    /// One line, e.g. `recomputed from token 12 (instructions (text 0)): prefixChanged, 80 cached tokens
    /// discarded`; after a restore, `session cache lost from token 0 (...): emptyCache, 0 cached tokens
    /// discarded; 76 restored from the shared store (76 memory, 0 disk), recomputed from token 76`.
    public var description: String {
        let cause = "(\(segment)): \(reason.rawValue), \(discardedTokenCount) cached tokens discarded"
        let restored = restoredFromSharedStoreCount + restoredFromDiskCount
        guard restored > 0 else { return "recomputed from token \(position) \(cause)" }
        return "session cache lost from token \(position) \(cause); \(restored) restored from the shared store "
            + "(\(restoredFromSharedStoreCount) memory, \(restoredFromDiskCount) disk), recomputed from token \(recomputedFrom)"
    }
}
