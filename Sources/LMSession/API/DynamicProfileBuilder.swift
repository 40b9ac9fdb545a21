import Foundation

/// Builds a dynamic profile's body: one profile, or `if`/`else` between profiles.
@resultBuilder
public enum DynamicProfileBuilder {
    /// A single profile.
    public static func buildBlock<P: DynamicProfile>(_ profile: P) -> P { profile }
    /// The `if` branch.
    public static func buildEither<F: DynamicProfile, S: DynamicProfile>(first: F) -> ConditionalProfile<F, S> { .first(first) }
    /// The `else` branch.
    public static func buildEither<F: DynamicProfile, S: DynamicProfile>(second: S) -> ConditionalProfile<F, S> { .second(second) }
}
