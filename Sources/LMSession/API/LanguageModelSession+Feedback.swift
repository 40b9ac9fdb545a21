import Foundation

extension LanguageModelSession {
    /// The session's transcript with a sentiment, issues and what the response should have been,
    /// as JSON to attach to a bug report (FoundationModels' Feedback Assistant attachment).
    ///
    /// Nothing is sent or logged anywhere: the data is returned, and it is the app's to keep or
    /// share. Its top-level keys are `sentiment` (absent when `nil`), `issues` (each a `category`
    /// and an optional `explanation`), `desiredOutput` (a transcript entry, absent when `nil`) and
    /// `transcript` (``Transcript``'s own Codable form, so it reads back as one).
    @discardableResult
    public func logFeedbackAttachment(sentiment: LanguageModelFeedback.Sentiment?, issues: [LanguageModelFeedback.Issue] = [],
                                      desiredOutput: Transcript.Entry? = nil) -> Data {
        let attachment = FeedbackAttachment(sentiment: sentiment, issues: issues, desiredOutput: desiredOutput, transcript: transcript)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Every part is plain Codable data (strings, numbers, generated content): encoding cannot fail.
        return (try? encoder.encode(attachment)) ?? Data()
    }

    /// The attachment with the response text that was wanted, as a response entry.
    @discardableResult
    public func logFeedbackAttachment(sentiment: LanguageModelFeedback.Sentiment?, issues: [LanguageModelFeedback.Issue] = [],
                                      desiredResponseText: String?) -> Data {
        logFeedbackAttachment(sentiment: sentiment, issues: issues, desiredOutput: desiredResponseText.map {
            .response(Transcript.Response(segments: [.text(.init(content: $0))]))
        })
    }

    /// The attachment with the structured content that was wanted, as a response entry.
    @discardableResult
    public func logFeedbackAttachment(sentiment: LanguageModelFeedback.Sentiment?, issues: [LanguageModelFeedback.Issue] = [],
                                      desiredResponseContent: (any ConvertibleToGeneratedContent)?) -> Data {
        logFeedbackAttachment(sentiment: sentiment, issues: issues, desiredOutput: desiredResponseContent.map {
            .response(Transcript.Response(segments: [.structure(.init(source: "desiredResponseContent", content: $0.generatedContent))]))
        })
    }
}

/// What `logFeedbackAttachment` serializes.
struct FeedbackAttachment: Codable {
    var sentiment: LanguageModelFeedback.Sentiment?
    var issues: [LanguageModelFeedback.Issue]
    var desiredOutput: Transcript.Entry?
    var transcript: Transcript
}
