import LMSessionMacros
import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

final class GenerableMacroTests: XCTestCase {
    let macros: [String: any Macro.Type] = ["Generable": GenerableMacro.self, "Guide": GuideMacro.self]

    func test_enum_expandsToChoices() {
        assertMacroExpansion(
            """
            @Generable(description: "A mood")
            enum Mood { case calm, `happy` }
            """,
            expandedSource: """
            enum Mood { case calm, `happy` }

            extension Mood: LMSession.Generable {
                static var generationSchema: LMSession.GenerationSchema {
                    LMSession.GenerationSchema(type: Self.self, description: "A mood", anyOf: ["calm", "happy"])
                }
                init(_ content: LMSession.GeneratedContent) throws {
                    switch try String(content) {
                    case "calm": self = .calm
                    case "happy": self = .`happy`
                    default: throw LMSession.GeneratedContentError.typeMismatch(expected: "one of calm, happy", found: content.jsonString)
                    }
                }
                var generatedContent: LMSession.GeneratedContent {
                    switch self {
                    case .calm: LMSession.GeneratedContent(kind: .string("calm"))
                    case .`happy`: LMSession.GeneratedContent(kind: .string("happy"))
                    }
                }
            }
            """,
            macros: macros
        )
    }

    func test_enumWithPayload_isDiagnosed() {
        assertMacroExpansion(
            "@Generable enum E { case a(Int) }",
            expandedSource: "enum E { case a(Int) }",
            diagnostics: [DiagnosticSpec(message: "@Generable supports enums whose cases have no associated values ('a' has some)",
                                         line: 1, column: 1)],
            macros: macros
        )
    }
}
