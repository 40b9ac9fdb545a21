import Foundation

/// One of two profiles, from an `if`/`else` in a dynamic profile's body.
public enum ConditionalProfile<First: DynamicProfile, Second: DynamicProfile>: DynamicProfile {
    /// The `if` branch.
    case first(First)
    /// The `else` branch.
    case second(Second)

    /// Resolves the branch taken, recording which one.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile {
        switch self {
        case let .first(p): p.resolveProfile(path: path + "/if")
        case let .second(p): p.resolveProfile(path: path + "/else")
        }
    }
}
