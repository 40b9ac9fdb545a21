import Synchronization

extension LanguageModelSession {
    /// The session state a dynamic profile can read and write through ``SessionProperty``.
    public struct Properties: Sendable, Equatable {
        /// The stored transcript entries after the instructions.
        public var history: [Transcript.Entry]
    }

    /// Gives a dynamic profile access to a session property while the session evaluates
    /// its body or runs its hooks.
    ///
    /// Writing `history` inside `onResponse` replaces the stored transcript (a stateful
    /// transform); the next request then recomputes from the first changed entry.
    /// Outside a request the wrapper reads an empty session and ignores writes.
    @propertyWrapper
    public struct SessionProperty<Value: Sendable>: Sendable {
        private let keyPath: WritableKeyPath<Properties, Value> & Sendable

        /// Binds to the property at `keyPath`, e.g. `@SessionProperty(\.history) var history`.
        public init(_ keyPath: WritableKeyPath<Properties, Value> & Sendable) { self.keyPath = keyPath }

        /// The property's current value in the running request's session.
        public var wrappedValue: Value {
            get {
                guard let context = SessionContext.current else { return Properties(history: [])[keyPath: keyPath] }
                return context.properties.withLock { $0[keyPath: keyPath] }
            }
            nonmutating set { SessionContext.current?.properties.withLock { $0[keyPath: keyPath] = newValue } }
        }
    }
}

/// The session state visible to profile code during one request.
final class SessionContext: Sendable {
    let properties: Mutex<LanguageModelSession.Properties>

    init(history: [Transcript.Entry]) { properties = Mutex(.init(history: history)) }

    /// The context of the request running in this task (`nil` outside requests).
    @TaskLocal static var current: SessionContext?

    var history: [Transcript.Entry] { properties.withLock { $0.history } }
}
