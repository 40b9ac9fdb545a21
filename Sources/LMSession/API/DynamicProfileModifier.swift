import Foundation

/// A reusable change to a dynamic profile, applied with ``DynamicProfile/modifier(_:)``: its
/// ``body(content:)`` receives the profile it wraps as ``Content`` and returns what the session
/// uses, usually that content with modifiers (`content.temperature(0.2)`), perhaps under a
/// condition.
///
/// A condition inside the modifier that returns the content either way is not a profile
/// switch: the session's cache is kept. A branch that returns a profile of its own is one.
public protocol DynamicProfileModifier {
    /// The type of profile ``body(content:)`` returns.
    associatedtype Body: DynamicProfile
    /// The profile to use in place of `content`.
    @DynamicProfileBuilder func body(content: Content) -> Body
}

extension DynamicProfileModifier {
    /// The profile the modifier is applied to, as its body receives it.
    public typealias Content = DynamicProfileModifierContent<Self>
    /// ``LMSession/DynamicProfile``, usable unqualified inside a modifier.
    public typealias DynamicProfile = LMSession.DynamicProfile
    /// ``LanguageModelSession/SessionProperty``, usable unqualified inside a modifier.
    public typealias SessionProperty = LanguageModelSession.SessionProperty
}

extension DynamicProfile {
    /// Applies `modifier` to this profile.
    public func modifier<Modifier: DynamicProfileModifier>(_ modifier: Modifier) -> ModifiedDynamicProfile<Self, Modifier> {
        ModifiedDynamicProfile(content: self, modifier: modifier)
    }
}

extension LanguageModelSession {
    /// Re-exported under the session, where Foundation Models declares it.
    public typealias DynamicProfileModifier = LMSession.DynamicProfileModifier
    /// Re-exported under the session, where Foundation Models declares it.
    public typealias DynamicProfileModifierContent = LMSession.DynamicProfileModifierContent
    /// Re-exported under the session, where Foundation Models declares it.
    public typealias ModifiedDynamicProfile = LMSession.ModifiedDynamicProfile
    /// Re-exported under the session, where Foundation Models declares it.
    public typealias DynamicProfileBuilder = LMSession.DynamicProfileBuilder
}
