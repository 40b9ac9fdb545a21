extension LanguageModelSession.GenerationError {
    /// A refusal in iOS 26's shape: the entries the model declined to respond to, from which
    /// the model itself explains the refusal when asked (the local models never refuse, so this
    /// package only builds one when converting a ``LanguageModelError/Refusal`` or when app code does).
    public struct Refusal: Sendable, Equatable {
        /// The entries leading up to the refusal.
        let transcriptEntries: [Transcript.Entry]
        /// The model that explains (the bundled `base` unless given).
        let model: any LanguageModel
        /// An explanation already known (a converted iOS 27 refusal), given back without generating.
        let explained: String?

        /// A refusal of the response to `transcriptEntries`, which `model` explains.
        public init(transcriptEntries: [Transcript.Entry], model: any LanguageModel = SystemLanguageModel.default) {
            self.transcriptEntries = transcriptEntries
            self.model = model
            explained = nil
        }

        init(explained text: String) {
            transcriptEntries = []
            model = SystemLanguageModel.default
            explained = text
        }

        /// The question put to the model after the refused entries, and the explanation's budget.
        static let question = "Explain briefly why you declined to respond."
        static let options = GenerationOptions(maximumResponseTokens: 200)

        /// The model's explanation: a session continuing the refused entries is asked why (at
        /// most 200 tokens).
        public var explanation: LanguageModelSession.Response<String> {
            get async throws {
                if let explained { return .explaining(explained) }
                return try await explainer().respond(to: Self.question, options: Self.options)
            }
        }

        /// The model's explanation, streamed.
        public var explanationStream: ResponseStream<String> {
            if let explained { return .explaining(explained) }
            return explainer().streamResponse(to: Self.question, options: Self.options)
        }

        private func explainer() -> LanguageModelSession {
            LanguageModelSession(model: model, tools: [], transcript: Transcript(entries: transcriptEntries))
        }

        /// Equal when the entries and any given explanation are (the model is not compared).
        public static func == (a: Self, b: Self) -> Bool {
            a.transcriptEntries == b.transcriptEntries && a.explained == b.explained
        }
    }
}
