import Foundation

/// A type-erased dynamic profile.
public struct AnyDynamicProfile: DynamicProfile, @unchecked Sendable {
    private let resolve: (String) -> LanguageModelSession.Profile

    /// Wraps `dynamicProfile`.
    public init(_ dynamicProfile: any DynamicProfile) { resolve = { dynamicProfile.resolveProfile(path: $0) } }

    /// Wraps `dynamicProfile`.
    public init(erasing dynamicProfile: some DynamicProfile) { self.init(dynamicProfile) }

    /// Resolves the wrapped profile.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile { resolve(path) }
}
