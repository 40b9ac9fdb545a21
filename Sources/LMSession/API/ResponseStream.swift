/// The snapshots of a streamed response, as an `AsyncSequence`.
public struct ResponseStream<Content: Generable>: AsyncSequence, Sendable {
    /// The response so far.
    public struct Snapshot: Sendable {
        /// The content generated so far, in its partial form (the text so far, for a string;
        /// a value whose unfinished properties are `nil`, for a generable structure).
        public var content: Content.PartiallyGenerated
        /// The content generated so far, as partial ``GeneratedContent``.
        public var rawContent: GeneratedContent
        /// Counts so far (`output.totalTokenCount` grows with each snapshot).
        public var usage: LanguageModelSession.Usage
    }

    let stream: AsyncThrowingStream<Snapshot, any Error>
    let task: Task<LanguageModelSession.Response<Content>, any Error>

    /// Iterates the snapshots.
    public func makeAsyncIterator() -> AsyncThrowingStream<Snapshot, any Error>.Iterator { stream.makeAsyncIterator() }

    /// Waits for the end of the response and returns it.
    public func collect() async throws -> LanguageModelSession.Response<Content> { try await task.value }
}

extension LanguageModelSession {
    /// The snapshots of a streamed response, under FoundationModels' nested name.
    public typealias ResponseStream<Content: Generable> = LMSession.ResponseStream<Content>
}
