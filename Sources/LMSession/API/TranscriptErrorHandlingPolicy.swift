extension LanguageModelSession {
    /// What to do with the transcript when a response is cut off by the context window.
    public enum TranscriptErrorHandlingPolicy: Sendable, Equatable {
        /// Keep the prompt and the partial response in the transcript.
        case preserveTranscript
        /// Leave the transcript as it was before the request.
        case revertTranscript
    }
}
