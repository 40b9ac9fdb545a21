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

    func test_enumWithPayload_expandsToAChoiceOfStructures() {
        assertMacroExpansion(
            """
            @Generable
            enum E {
                case a(Int), b
            }
            """,
            expandedSource: """
            enum E {
                case a(Int), b
            }

            extension E: LMSession.Generable {
                static var generationSchema: LMSession.GenerationSchema {
                    let choice = LMSession.DynamicGenerationSchema(name: String(describing: Self.self), description: nil, anyOf: [
                            LMSession.DynamicGenerationSchema(name: "a", properties: [LMSession.DynamicGenerationSchema.Property(name: "a", schema: LMSession.DynamicGenerationSchema(name: "a", properties: [LMSession.DynamicGenerationSchema.Property(name: "_0", schema: LMSession.DynamicGenerationSchema(type: (Int).self), isOptional: false)]))]),
                            LMSession.DynamicGenerationSchema(name: "b", properties: [LMSession.DynamicGenerationSchema.Property(name: "b", schema: LMSession.DynamicGenerationSchema(name: "b", properties: []))])
                    ])
                    return (try? LMSession.GenerationSchema(root: choice, dependencies: [])) ?? LMSession.GenerationSchema(type: Self.self, anyOf: [String]())
                }
                init(_ content: LMSession.GeneratedContent) throws {
                    guard case let .structure(properties, keys) = content.kind, let key = keys.first, let payload = properties[key] else {
                        throw LMSession.GeneratedContentError.typeMismatch(expected: "a structure naming one case", found: content.jsonString)
                    }
                    switch key {
                    case "a":
                        self = .a(try payload.value((Int).self, forProperty: "_0"))
                    case "b":
                        self = .b
                    default:
                        throw LMSession.GeneratedContentError.typeMismatch(expected: "one of a, b", found: key)
                    }
                }
                var generatedContent: LMSession.GeneratedContent {
                    switch self {
                    case .a(let v0):
                        LMSession.GeneratedContent(properties: ["a": LMSession.GeneratedContent(properties: ["_0": v0])])
                    case .b:
                        LMSession.GeneratedContent(properties: ["b": LMSession.GeneratedContent(properties: [:])])
                    }
                }
            }
            """,
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
