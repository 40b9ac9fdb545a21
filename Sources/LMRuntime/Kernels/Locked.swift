import Foundation

/// A value behind a lock, for the package's shared state (the prefix store, sessions, models):
/// the same `withLock` as `Mutex`, over an `NSLock` (a pthread mutex). ThreadSanitizer sees a
/// pthread mutex's ordering; it does not see `Synchronization.Mutex`'s on Linux (a futex inside
/// the uninstrumented standard library), and reports every access made under one as a race,
/// which would hide a real one among them.
package final class Locked<Value>: @unchecked Sendable {   // `value` is touched only while `lock` is held
    private let lock = NSLock()
    private var value: Value

    /// A lock around `value`.
    package init(_ value: Value) { self.value = value }

    /// Runs `body` on the value with the lock held.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
