import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// The compiler plug-in that provides `@Generable` and `@Guide`.
@main
struct LMSessionMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [GenerableMacro.self, GuideMacro.self, SessionPropertyEntryMacro.self]
}
