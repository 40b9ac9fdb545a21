import Foundation

/// A dynamic profile with a modifier applied to whatever it resolves to.
public struct ModifiedProfile<Content: DynamicProfile>: DynamicProfile {
    let content: Content
    let modify: (inout LanguageModelSession.Profile) -> Void

    /// Resolves the content, then applies the modifier.
    public func resolveProfile(path: String) -> LanguageModelSession.Profile {
        var profile = content.resolveProfile(path: path)
        modify(&profile)
        return profile
    }
}
