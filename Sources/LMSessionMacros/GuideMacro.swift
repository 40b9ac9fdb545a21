import SwiftSyntax
import SwiftSyntaxMacros

/// `@Guide` marks a property with a description and guides; it expands to nothing:
/// `@Generable` reads it when it builds the schema.
public struct GuideMacro: PeerMacro {
    /// No peers: the attribute only carries its description for `@Generable` to read.
    public static func expansion(of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [DeclSyntax] { [] }
}
