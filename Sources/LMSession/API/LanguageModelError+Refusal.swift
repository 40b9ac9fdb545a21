extension LanguageModelError {
    /// A model's refusal to respond, with its explanation (FoundationModels' iOS 27 shape; the
    /// local models never refuse, so this package never throws one).
    public struct Refusal: Sendable, Equatable, CustomDebugStringConvertible {
        /// The explanation, as given.
        let explanationText: String
        /// What happened.
        public var debugDescription: String
        /// Additional information, keyed by name.
        public var metadata: [String: any Sendable]

        /// A refusal with its explanation.
        public init(explanation: String, debugDescription: String, metadata: [String: any Sendable] = [:]) {
            explanationText = explanation
            self.debugDescription = debugDescription
            self.metadata = metadata
        }

        /// Why the model refused, as a response (no tokens generated: the text is the one given).
        public var explanation: LanguageModelSession.Response<String> {
            get async throws { .explaining(explanationText) }
        }

        /// The explanation as a stream of one snapshot.
        public var explanationStream: LanguageModelSession.ResponseStream<String> { .explaining(explanationText) }

        /// The same refusal in iOS 26's shape, keeping the explanation.
        var generationRefusal: LanguageModelSession.GenerationError.Refusal { .init(explained: explanationText) }

        /// Equal when the explanations and descriptions are (metadata ignored).
        public static func == (a: Self, b: Self) -> Bool {
            (a.explanationText, a.debugDescription) == (b.explanationText, b.debugDescription)
        }
    }
}

extension LanguageModelSession.Response<String> {
    /// A response holding `text` that no request produced: an explanation given with an error.
    static func explaining(_ text: String) -> Self {
        .init(content: text, rawContent: GeneratedContent(text), transcriptEntries: [], usage: .init(), invalidation: nil)
    }
}

extension ResponseStream<String> {
    /// A stream whose one snapshot is `text`, finished.
    static func explaining(_ text: String) -> Self {
        let (stream, continuation) = AsyncThrowingStream<Snapshot, any Error>.makeStream()
        continuation.yield(.init(content: text, rawContent: GeneratedContent(text), usage: .init()))
        continuation.finish()
        return .init(stream: stream, task: Task { .explaining(text) })
    }
}
