extension LanguageModelSession {
    /// A finished response.
    public struct Response<Content: Sendable>: Sendable {
        /// The generated content.
        public var content: Content
        /// The content as generated: a string for a text response, the structured value for a
        /// guided one.
        public var rawContent: GeneratedContent
        /// The transcript entries this request added (prompt, tool calls and outputs, response).
        public var transcriptEntries: ArraySlice<Transcript.Entry>
        /// Token counts and timings of this request.
        public var usage: Usage
        /// Why the cache was not fully reused, or `nil` when every cached token was.
        public var invalidation: InvalidationReport?

        /// The same response with its content read as `Other` from `raw`.
        func converted<Other: Generable>(_ raw: GeneratedContent) throws -> Response<Other> {
            let content: Other
            do { content = try Other(raw) } catch let error as GeneratedContentError {
                throw LanguageModelError.decodingFailure(error)
            }
            return Response<Other>(content: content, rawContent: raw, transcriptEntries: transcriptEntries,
                                   usage: usage, invalidation: invalidation)
        }
    }
}
