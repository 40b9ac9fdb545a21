import SwiftSyntax
import SwiftSyntaxMacros

/// `@SessionPropertyEntry var name: T = default` in an extension of
/// `LanguageModelSession.SessionPropertyValues`: a custom session property, stored with the
/// session under its name and read as `default` until written.
public struct SessionPropertyEntryMacro: AccessorMacro {
    /// The getter and setter that read and write the property in the session's values by its name.
    public static func expansion(of node: AttributeSyntax, providingAccessorsOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [AccessorDeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self), let binding = variable.bindings.first,
              let name = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier.text else {
            throw GenerableMacro.MacroError("@SessionPropertyEntry applies to a variable")
        }
        guard let value = binding.initializer?.value else {
            throw GenerableMacro.MacroError("@SessionPropertyEntry needs a default value ('\(name)' has none)")
        }
        let key = GenerableMacro.literal(name)
        return [
            "get { self[entry: \(raw: key), default: \(value.trimmed)] }",
            "set { self[entry: \(raw: key), default: \(value.trimmed)] = newValue }",
        ]
    }
}
