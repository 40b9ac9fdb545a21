import Foundation

/// A dynamic profile with a ``DynamicProfileModifier`` applied to it.
public struct ModifiedDynamicProfile<Content: DynamicProfile, Modifier: DynamicProfileModifier>: DynamicProfile {
    let content: Content
    let modifier: Modifier

    /// Resolves the modifier's body, the wrapped profile standing in as its content. A profile
    /// the body makes itself is identified by the modifier's branch taken to reach it.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile {
        let wrapped = Modifier.Content { content.resolveProfile(path: path) }
        return modifier.body(content: wrapped).resolveProfile(path: path + "/modifier")
    }
}
