import LMSessionMacros
import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

final class GenerableMacroTests: XCTestCase {
    let macros: [String: any Macro.Type] = ["Generable": GenerableMacro.self, "Guide": GuideMacro.self,
                                            "SessionPropertyEntry": SessionPropertyEntryMacro.self]

    func test_enum_expandsToChoices() {
        assertMacroExpansion(
            """
            @Generable(description: "A mood")
            enum Mood {
                case calm, `happy`
            }
            """,
            expandedSource: """
            enum Mood {
                case calm, `happy`
            }

            extension Mood: LMSession.Generable {
                static var generationSchema: LMSession.GenerationSchema {
                    LMSession.GenerationSchema(type: Self.self, description: "A mood", anyOf: ["calm", "happy"])
                }
                init(_ content: LMSession.GeneratedContent) throws {
                    switch try String(content) {
                    case "calm":
                        self = .calm
                    case "happy":
                        self = .`happy`
                    default:
                        throw LMSession.GeneratedContentError.typeMismatch(expected: "one of calm, happy", found: content.jsonString)
                    }
                }
                var generatedContent: LMSession.GeneratedContent {
                    switch self {
                    case .calm:
                        LMSession.GeneratedContent(kind: .string("calm"))
                    case .`happy`:
                        LMSession.GeneratedContent(kind: .string("happy"))
                    }
                }
            }
            """,
            macros: macros
        )
    }

    func test_struct_expandsPropertiesInOrderWithGuides() {
        assertMacroExpansion(
            """
            @Generable
            public struct Plan {
                @Guide(description: "A title")
                let title: String
                @Guide(description: "Steps", .count(2...3))
                var steps: [String]
                @Guide(.pattern(/[A-Z]+/))
                let code: String
                let note: String?
                var computed: Int { 1 }
                static let shared = 0
            }
            """,
            expandedSource: """
            public struct Plan {
                let title: String
                var steps: [String]
                let code: String
                let note: String?
                var computed: Int { 1 }
                static let shared = 0
            }

            extension Plan: LMSession.Generable {
                public static var generationSchema: LMSession.GenerationSchema {
                    LMSession.GenerationSchema(type: Self.self, description: nil, properties: [
                            LMSession.GenerationSchema.Property(name: "title", description: "A title", type: (String).self, guides: []),
                            LMSession.GenerationSchema.Property(name: "steps", description: "Steps", type: ([String]).self, guides: [.count(2 ... 3)]),
                            LMSession.GenerationSchema.Property(name: "code", description: nil, type: (String).self, guides: [.pattern(/[A-Z]+/)]),
                            LMSession.GenerationSchema.Property(name: "note", description: nil, type: (String?).self, guides: [])
                    ])
                }
                public init(_ content: LMSession.GeneratedContent) throws {
                    self.title = try content.value((String).self, forProperty: "title")
                    self.steps = try content.value(([String]).self, forProperty: "steps")
                    self.code = try content.value((String).self, forProperty: "code")
                    self.note = try content.value((String?).self, forProperty: "note")
                }
                public var generatedContent: LMSession.GeneratedContent {
                    LMSession.GeneratedContent(properties: ["title": self.title, "steps": self.steps, "code": self.code, "note": self.note])
                }
                /// The value while it is generated: properties not generated yet are `nil`.
                public struct PartiallyGenerated: Sendable, Identifiable, LMSession.ConvertibleFromGeneratedContent {
                    public var id: LMSession.GenerationID
                    public var title: (String).PartiallyGenerated?
                    public var steps: ([String]).PartiallyGenerated?
                    public var code: (String).PartiallyGenerated?
                    public var note: (String).PartiallyGenerated?
                    public init(_ content: LMSession.GeneratedContent) throws {
                        self.id = content.id ?? LMSession.GenerationID()
                        self.title = try content.value((String).PartiallyGenerated?.self, forProperty: "title")
                        self.steps = try content.value(([String]).PartiallyGenerated?.self, forProperty: "steps")
                        self.code = try content.value((String).PartiallyGenerated?.self, forProperty: "code")
                        self.note = try content.value((String).PartiallyGenerated?.self, forProperty: "note")
                    }
                }
            }
            """,
            macros: macros
        )
    }

    func test_enumWithPayload_isDiagnosed() {
        assertMacroExpansion(
            """
            @Generable
            enum E {
                case a(Int)
            }
            """,
            expandedSource: """
            enum E {
                case a(Int)
            }
            """,
            diagnostics: [DiagnosticSpec(message: "@Generable supports enums whose cases have no associated values ('a' has some)",
                                         line: 1, column: 1)],
            macros: macros
        )
    }

    func test_propertyWithoutType_isDiagnosed() {
        assertMacroExpansion(
            """
            @Generable
            struct S {
                var name = "x"
            }
            """,
            expandedSource: """
            struct S {
                var name = "x"
            }
            """,
            diagnostics: [DiagnosticSpec(message: "@Generable needs the type of 'name' written out", line: 1, column: 1)],
            macros: macros
        )
    }

    func test_sessionPropertyEntry_expandsToAccessorsWithItsDefault() {
        assertMacroExpansion(
            """
            extension LanguageModelSession.SessionPropertyValues {
                @SessionPropertyEntry var count: Int = 0
            }
            """,
            expandedSource: """
            extension LanguageModelSession.SessionPropertyValues {
                var count: Int {
                    get {
                        self[entry: "count", default: 0]
                    }
                    set {
                        self[entry: "count", default: 0] = newValue
                    }
                }
            }
            """,
            macros: macros
        )
    }
}
