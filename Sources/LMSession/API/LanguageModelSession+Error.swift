import Foundation

extension LanguageModelSession {
    /// A session used in a way it cannot serve (FoundationModels' iOS 27 shape).
    ///
    /// Inside the session's own extensions this name shadows Swift's `Error` protocol, as it
    /// does in FoundationModels: write `Swift.Error` there.
    public enum Error: Swift.Error, Hashable, CustomStringConvertible, LocalizedError {
        /// A request arrived while another was running; a session serves one at a time. The
        /// running request goes on undisturbed.
        case concurrentRequests
        /// The ``LanguageModelSession/transcript`` was replaced while a request was running. The
        /// replacement stands; the request's entries are not appended to it and its computed
        /// tokens are not kept as the session's cache.
        case transcriptMutationWhileResponding

        /// A sentence naming the problem.
        public var description: String {
            switch self {
            case .concurrentRequests: "a request is already running on this session"
            case .transcriptMutationWhileResponding: "the transcript was replaced while a request was running"
            }
        }

        /// The same sentence, for `localizedDescription`.
        public var errorDescription: String? { description }

        /// The same error in iOS 26's ``LanguageModelSession/GenerationError`` shape (which has
        /// no case for a replaced transcript: both are `concurrentRequests` there).
        public var generationError: GenerationError {
            .concurrentRequests(.init(debugDescription: description))
        }
    }
}
