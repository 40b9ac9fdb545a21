import LMRuntime

/// The session state visible to profile code during one request.
final class SessionContext: Sendable {
    let properties: Locked<LanguageModelSession.SessionPropertyValues>

    init(_ values: LanguageModelSession.SessionPropertyValues) { properties = Locked(values) }

    /// The context of the request running in this task (`nil` outside requests).
    @TaskLocal static var current: SessionContext?

    var history: [Transcript.Entry] { properties.withLock { $0.history } }
    var values: LanguageModelSession.SessionPropertyValues { properties.withLock { $0 } }
}
