import Foundation

/// The profile a ``DynamicProfileModifier`` is applied to, as its body receives it: it resolves
/// to what the wrapped profile resolves to, under the wrapped profile's own branch, whichever
/// branch of the modifier's body it is returned from.
public struct DynamicProfileModifierContent<Modifier: DynamicProfileModifier>: DynamicProfile {
    let resolve: () -> LanguageModelSession.Profile

    /// The wrapped profile; the modifier's branches do not change its identity.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile { resolve() }
}
