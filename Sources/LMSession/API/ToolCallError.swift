extension LanguageModelSession {
    /// A tool threw while the session ran it; the request stops with this error and the
    /// transcript is left as it was before the request.
    public struct ToolCallError: Error, CustomStringConvertible {
        /// The tool that threw.
        public var tool: any Tool
        /// What it threw (or the conversion error when the arguments could not be read).
        public var underlyingError: any Error

        /// A tool-call error.
        public init(tool: any Tool, underlyingError: any Error) {
            self.tool = tool
            self.underlyingError = underlyingError
        }

        /// A sentence naming the tool and the error.
        public var description: String { "tool '\(tool.name)' failed: \(underlyingError)" }
    }
}
