import SwiftSyntax
import SwiftSyntaxMacros

/// `@Guide` marks a property with a description and guides; it expands to nothing:
/// `@Generable` reads it when it builds the schema.
public struct GuideMacro: PeerMacro {
    public static func expansion(of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [DeclSyntax] { [] }
}
