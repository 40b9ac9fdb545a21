import Foundation

extension LanguageModelSession {
    /// A tool threw while the session ran it; the request stops with this error and the
    /// transcript is left as it was before the request.
    public struct ToolCallError: Swift.Error, CustomStringConvertible, LocalizedError {
        /// The tool that threw.
        public var tool: any Tool
        /// What it threw (or the conversion error when the arguments could not be read).
        public var underlyingError: any Swift.Error

        /// A tool-call error.
        public init(tool: any Tool, underlyingError: any Swift.Error) {
            self.tool = tool
            self.underlyingError = underlyingError
        }

        /// A sentence naming the tool and the error.
        public var description: String { "tool '\(tool.name)' failed: \(underlyingError)" }
        /// The same sentence, for `localizedDescription`.
        public var errorDescription: String? { description }
    }
}
