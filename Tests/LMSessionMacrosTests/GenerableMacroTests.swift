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

                public typealias _Generable_title = String

                public typealias _Generable_steps = [String]

                public typealias _Generable_code = String

                public typealias _Generable_note = String
            }

            extension Plan: LMSession.Generable {
                public static var generationSchema: LMSession.GenerationSchema {
                    LMSession.GenerationSchema(type: Self.self, description: nil, properties: [
                            LMSession.GenerationSchema.Property(name: "title", description: "A title", type: Plan._Generable_title.self, guides: []),
                            LMSession.GenerationSchema.Property(name: "steps", description: "Steps", type: Plan._Generable_steps.self, guides: [.count(2 ... 3)]),
                            LMSession.GenerationSchema.Property(name: "code", description: nil, type: Plan._Generable_code.self, guides: [.pattern(/[A-Z]+/)]),
                            LMSession.GenerationSchema.Property(name: "note", description: nil, type: Plan._Generable_note?.self, guides: [])
                    ])
                }
                public init(_ content: LMSession.GeneratedContent) throws {
                    self.title = try content.value(Plan._Generable_title.self, forProperty: "title")
                    self.steps = try content.value(Plan._Generable_steps.self, forProperty: "steps")
                    self.code = try content.value(Plan._Generable_code.self, forProperty: "code")
                    self.note = try content.value(Plan._Generable_note?.self, forProperty: "note")
                }
                public var generatedContent: LMSession.GeneratedContent {
                    LMSession.GeneratedContent(properties: ["title": self.title, "steps": self.steps, "code": self.code, "note": self.note])
                }
                /// The value while it is generated: properties not generated yet are `nil`.
                public struct PartiallyGenerated: Sendable, Identifiable, LMSession.ConvertibleFromGeneratedContent {
                    public var id: LMSession.GenerationID
                    public var title: Plan._Generable_title.PartiallyGenerated?
                    public var steps: Plan._Generable_steps.PartiallyGenerated?
                    public var code: Plan._Generable_code.PartiallyGenerated?
                    public var note: Plan._Generable_note.PartiallyGenerated?
                    public init(_ content: LMSession.GeneratedContent) throws {
                        self.id = content.id ?? LMSession.GenerationID()
                        self.title = try content.value(Plan._Generable_title.PartiallyGenerated?.self, forProperty: "title")
                        self.steps = try content.value(Plan._Generable_steps.PartiallyGenerated?.self, forProperty: "steps")
                        self.code = try content.value(Plan._Generable_code.PartiallyGenerated?.self, forProperty: "code")
                        self.note = try content.value(Plan._Generable_note.PartiallyGenerated?.self, forProperty: "note")
                    }
                }
            }
            """,
            macros: macros
        )
    }

    /// Foundation Models' form: a structure per case whose `type` names it, unlabeled values
    /// generated as `value`, `value1`..., labeled ones under their labels.
    func test_enumWithPayload_expandsToAChoiceOfStructuresNamedByType() {
        assertMacroExpansion(
            """
            @Generable
            enum E {
                case a(Int, x: String?), b
                case c(Int, Int)
            }
            """,
            expandedSource: """
            enum E {
                case a(Int, x: String?), b
                case c(Int, Int)

                typealias _Generable_a_value = Int

                typealias _Generable_a_x = String

                typealias _Generable_c_value = Int

                typealias _Generable_c_value1 = Int
            }

            extension E: LMSession.Generable {
                static var generationSchema: LMSession.GenerationSchema {
                    let name = String(describing: Self.self)
                    let choice = LMSession.DynamicGenerationSchema(name: name, description: nil, anyOf: [
                            LMSession.DynamicGenerationSchema(name: name + ".DiscriminatedA", description: nil, properties: [LMSession.DynamicGenerationSchema.Property(name: "type", schema: LMSession.DynamicGenerationSchema(name: name + ".DiscriminatedA", anyOf: ["a"])), LMSession.DynamicGenerationSchema.Property(name: "value", schema: LMSession.DynamicGenerationSchema(type: E._Generable_a_value.self), isOptional: false), LMSession.DynamicGenerationSchema.Property(name: "x", schema: LMSession.DynamicGenerationSchema(type: E._Generable_a_x.self), isOptional: true)]),
                            LMSession.DynamicGenerationSchema(name: name + ".DiscriminatedB", description: nil, properties: [LMSession.DynamicGenerationSchema.Property(name: "type", schema: LMSession.DynamicGenerationSchema(name: name + ".DiscriminatedB", anyOf: ["b"]))]),
                            LMSession.DynamicGenerationSchema(name: name + ".DiscriminatedC", description: nil, properties: [LMSession.DynamicGenerationSchema.Property(name: "type", schema: LMSession.DynamicGenerationSchema(name: name + ".DiscriminatedC", anyOf: ["c"])), LMSession.DynamicGenerationSchema.Property(name: "value", schema: LMSession.DynamicGenerationSchema(type: E._Generable_c_value.self), isOptional: false), LMSession.DynamicGenerationSchema.Property(name: "value1", schema: LMSession.DynamicGenerationSchema(type: E._Generable_c_value1.self), isOptional: false)])
                    ])
                    return (try? LMSession.GenerationSchema(root: choice, dependencies: [])) ?? LMSession.GenerationSchema(type: Self.self, anyOf: [String]())
                }
                init(_ content: LMSession.GeneratedContent) throws {
                    let type = try content.value(String.self, forProperty: "type")
                    switch type {
                    case "a":
                        self = .a(try content.value(E._Generable_a_value.self, forProperty: "value"), x: try content.value(E._Generable_a_x?.self, forProperty: "x"))
                    case "b":
                        self = .b
                    case "c":
                        self = .c(try content.value(E._Generable_c_value.self, forProperty: "value"), try content.value(E._Generable_c_value1.self, forProperty: "value1"))
                    default:
                        throw LMSession.GeneratedContentError.typeMismatch(expected: "one of a, b, c", found: type)
                    }
                }
                var generatedContent: LMSession.GeneratedContent {
                    switch self {
                    case .a(let v0, let v1):
                        LMSession.GeneratedContent._enumCase("a", values: [("value", v0), ("x", v1)])
                    case .b:
                        LMSession.GeneratedContent._enumCase("b", values: [])
                    case .c(let v0, let v1):
                        LMSession.GeneratedContent._enumCase("c", values: [("value", v0), ("value1", v1)])
                    }
                }
            }
            """,
            macros: macros
        )
    }

    func test_enumWithAValueLabeledType_isDiagnosed() {
        assertMacroExpansion(
            """
            @Generable
            enum E {
                case move(type: String)
            }
            """,
            expandedSource: """
            enum E {
                case move(type: String)
            }
            """,
            diagnostics: [DiagnosticSpec(message: "@Generable: case 'move' has a value labeled 'type', the property that names the case",
                                         line: 1, column: 1)],
            macros: macros
        )
    }

    func test_enumWithTwoValuesOfOneName_isDiagnosed() {
        assertMacroExpansion(
            """
            @Generable
            enum E {
                case pair(Int, value: Int)
            }
            """,
            expandedSource: """
            enum E {
                case pair(Int, value: Int)
            }
            """,
            diagnostics: [DiagnosticSpec(message: "@Generable: case 'pair' has two values generated as 'value'", line: 1, column: 1)],
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
