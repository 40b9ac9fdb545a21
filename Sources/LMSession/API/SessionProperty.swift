import Synchronization

extension LanguageModelSession {
    /// The session state a dynamic profile can read and write through ``SessionProperty``:
    /// the history, and custom properties declared with ``SessionPropertyEntry()``:
    ///
    /// ```swift
    /// extension LanguageModelSession.SessionPropertyValues {
    ///     @SessionPropertyEntry var turnsSinceSummary: Int = 0
    /// }
    /// ```
    ///
    /// Custom properties live with the session from one request to the next.
    public struct SessionPropertyValues: Sendable {
        /// The stored transcript entries after the instructions.
        public var history: [Transcript.Entry]
        /// Custom properties by name.
        var entries: [String: any Sendable] = [:]

        /// A custom property's value, or `defaultValue` until it is written (used by ``SessionPropertyEntry()``).
        public subscript<Value: Sendable>(entry name: String, default defaultValue: @autoclosure () -> Value) -> Value {
            get { entries[name] as? Value ?? defaultValue() }
            set { entries[name] = newValue }
        }
    }

    /// The earlier name of ``SessionPropertyValues``.
    public typealias Properties = SessionPropertyValues

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
                guard let context = SessionContext.current else { return SessionPropertyValues(history: [])[keyPath: keyPath] }
                return context.properties.withLock { $0[keyPath: keyPath] }
            }
            nonmutating set { SessionContext.current?.properties.withLock { $0[keyPath: keyPath] = newValue } }
        }
    }
}
