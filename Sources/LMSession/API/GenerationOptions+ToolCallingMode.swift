extension GenerationOptions {
    /// Whether a response may, must or must not call the offered tools.
    ///
    /// Saved with the same encoding the earlier enum of these three cases had, so transcripts
    /// written before still read.
    public struct ToolCallingMode: Sendable, Equatable, Hashable, Codable {
        /// The three behaviours.
        public enum Kind: Sendable, Equatable, Hashable, Codable {
            /// The model decides.
            case allowed
            /// Every round opens with a tool call.
            case required
            /// No call.
            case disallowed
        }

        /// The behaviour this mode stands for.
        public var kind: Kind

        /// The model decides whether to call a tool (the default).
        public static let allowed = ToolCallingMode(kind: .allowed)
        /// Each round of the response opens with a tool call (its arguments decoded under the
        /// tool's schema), as Apple documents it: the session keeps calling tools until a tool
        /// throws (``LanguageModelSession/ToolCallError``) or the mode changes (a dynamic profile
        /// is read again after each tool round). A request that does neither ends when the next
        /// round no longer fits the window, with ``LanguageModelError/contextSizeExceeded(_:)``.
        public static let required = ToolCallingMode(kind: .required)
        /// No tool call: the call marker is masked out, the tools stay in the instructions (so the
        /// cached prefix does not change).
        public static let disallowed = ToolCallingMode(kind: .disallowed)

        /// Reads the mode as the earlier enum wrote it.
        public init(from decoder: any Decoder) throws { kind = try Kind(from: decoder) }

        /// Writes the mode as the earlier enum did.
        public func encode(to encoder: any Encoder) throws { try kind.encode(to: encoder) }

        private init(kind: Kind) { self.kind = kind }
    }
}
