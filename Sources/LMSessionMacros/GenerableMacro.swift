import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@Generable` on a struct or an enum: adds the `Generable` conformance in
/// an extension (so the memberwise initializer stays): `generationSchema` (properties in
/// declaration order with their `@Guide` descriptions and guides), `init(_: GeneratedContent)`,
/// `generatedContent`, and for a struct a `PartiallyGenerated` with every property optional.
///
/// The extension is read at file scope, where a type nested beside the declaration (`Item` in
/// `enum Screen { struct Item; struct Page { let items: [Item] } }`) is not in scope, or names
/// another type. So the macro also adds, inside the declaration, a type alias for each property's
/// (and each case value's) type, resolved where it was written, and the extension names those.
public struct GenerableMacro: ExtensionMacro, MemberMacro {
    /// The extension that makes the declaration `Generable`; throws an error naming what it cannot be built from.
    public static func expansion(of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
                                 providingExtensionsOf type: some TypeSyntaxProtocol, conformingTo protocols: [TypeSyntax],
                                 in context: some MacroExpansionContext) throws -> [ExtensionDeclSyntax] {
        let description = argument(named: "description", in: node) ?? "nil"
        let access = accessLevel(of: declaration)
        let owner = type.trimmedDescription
        let body: String
        if let structure = declaration.as(StructDeclSyntax.self) {
            body = try structMembers(structure, owner: owner, description: description, access: access, context: context)
        } else if let enumeration = declaration.as(EnumDeclSyntax.self) {
            body = try enumMembers(enumeration, owner: owner, description: description, access: access)
        } else {
            throw MacroError("@Generable applies to structs and enums")
        }
        let decl: DeclSyntax = "extension \(type.trimmed): LMSession.Generable {\n\(raw: body)\n}"
        return [decl.cast(ExtensionDeclSyntax.self)]
    }

    /// The type aliases the extension names the declaration's types by (see the type's documentation).
    /// A declaration the extension cannot be built from gets none: that expansion reports why.
    public static func expansion(of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax,
                                 conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext) throws -> [DeclSyntax] {
        let access = accessLevel(of: declaration)
        var aliases: [(name: String, type: String)] = []
        if let structure = declaration.as(StructDeclSyntax.self), let properties = try? storedProperties(structure) {
            aliases = properties.map { (alias(of: $0.name), $0.wrapped ?? $0.type) }
        } else if let enumeration = declaration.as(EnumDeclSyntax.self),
                  (try? enumMembers(enumeration, owner: "Self", description: "nil", access: "")) != nil {
            let (cases, payloads) = casesAndPayloads(enumeration)
            aliases = zip(cases, payloads).flatMap { c, values in values.map { (alias(of: $0.property, in: c), $0.wrapped ?? $0.type) } }
        }
        return aliases.map { "\(raw: access)typealias \(raw: $0.name) = \(raw: $0.type)" }
    }

    /// The name of the alias for a property's type, or for a case's value's.
    static func alias(of property: String, in enumCase: String? = nil) -> String {
        "_Generable_" + (enumCase.map { backticksRemoved($0) + "_" } ?? "") + backticksRemoved(property)
    }

    struct MacroError: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    struct StoredProperty {
        var name: String
        var type: String
        /// The wrapped type when the property is optional.
        var wrapped: String?
        var description: String
        var guides: [String]
    }

    static func accessLevel(of declaration: some DeclGroupSyntax) -> String {
        for modifier in declaration.modifiers {
            switch modifier.name.tokenKind {
            case .keyword(.public): return "public "
            case .keyword(.package): return "package "
            case .keyword(.fileprivate), .keyword(.private): return "fileprivate "
            default: continue
            }
        }
        return ""
    }

    static func argument(named label: String, in node: AttributeSyntax) -> String? {
        guard case let .argumentList(list) = node.arguments else { return nil }
        return list.first { $0.label?.text == label }.map { $0.expression.trimmedDescription }
    }

    static func storedProperties(_ structure: StructDeclSyntax) throws -> [StoredProperty] {
        var result: [StoredProperty] = []
        for member in structure.memberBlock.members {
            guard let variable = member.decl.as(VariableDeclSyntax.self),
                  !variable.modifiers.contains(where: { $0.name.tokenKind == .keyword(.static) }) else { continue }
            var description = "nil", guides: [String] = []
            for attribute in variable.attributes {
                guard let a = attribute.as(AttributeSyntax.self), a.attributeName.trimmedDescription == "Guide",
                      case let .argumentList(list) = a.arguments else { continue }
                for arg in list {
                    if arg.label?.text == "description" {
                        description = arg.expression.trimmedDescription
                    } else if arg.expression.is(RegexLiteralExprSyntax.self) {
                        guides.append(".pattern(\(arg.expression.trimmedDescription))")
                    } else {
                        guides.append(arg.expression.trimmedDescription)
                    }
                }
            }
            for binding in variable.bindings {
                if let accessors = binding.accessorBlock {
                    // Computed properties are not generated; observers (willSet/didSet) are stored.
                    if case .getter = accessors.accessors { continue }
                    if case let .accessors(list) = accessors.accessors,
                       list.contains(where: { [.keyword(.get), .keyword(.set)].contains($0.accessorSpecifier.tokenKind) }) { continue }
                }
                guard let name = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier.text else { continue }
                guard let type = binding.typeAnnotation?.type else {
                    throw MacroError("@Generable needs the type of '\(name)' written out")
                }
                var wrapped: String?
                if let optional = type.as(OptionalTypeSyntax.self) {
                    wrapped = optional.wrappedType.trimmedDescription
                } else if let id = type.as(IdentifierTypeSyntax.self), id.name.text == "Optional",
                          let arg = id.genericArgumentClause?.arguments.first {
                    wrapped = arg.argument.trimmedDescription
                }
                result.append(StoredProperty(name: name, type: type.trimmedDescription, wrapped: wrapped,
                                             description: description, guides: guides))
            }
        }
        return result
    }

    static func structMembers(_ structure: StructDeclSyntax, owner: String, description: String, access: String,
                              context: some MacroExpansionContext) throws -> String {
        let properties = try storedProperties(structure)
        /// The property's type without its optional, through its alias.
        func base(_ p: StoredProperty) -> String { "\(owner).\(alias(of: p.name))" }
        func type(_ p: StoredProperty) -> String { base(p) + (p.wrapped == nil ? "" : "?") }
        let schemaProperties = properties.map { p in
            "LMSession.GenerationSchema.Property(name: \(literal(p.name)), description: \(p.description), type: \(type(p)).self, guides: [\(p.guides.joined(separator: ", "))])"
        }
        let reads = properties.map { p in "self.\(p.name) = try content.value(\(type(p)).self, forProperty: \(literal(p.name)))" }
        let pairs = properties.map { "\(literal($0.name)): self.\($0.name)" }
        let partialFields = properties.map { p in "\(access)var \(p.name): \(base(p)).PartiallyGenerated?" }
        let partialReads = properties.map { p in
            "self.\(p.name) = try content.value(\(base(p)).PartiallyGenerated?.self, forProperty: \(literal(p.name)))"
        }
        return """
            \(access)static var generationSchema: LMSession.GenerationSchema {
                LMSession.GenerationSchema(type: Self.self, description: \(description), properties: [\(schemaProperties.map { "\n" + $0 }.joined(separator: ","))
                ])
            }
            \(access)init(_ content: LMSession.GeneratedContent) throws {
                \(reads.joined(separator: "\n"))
            }
            \(access)var generatedContent: LMSession.GeneratedContent {
                LMSession.GeneratedContent(properties: [\(pairs.isEmpty ? ":" : pairs.joined(separator: ", "))])
            }
            /// The value while it is generated: properties not generated yet are `nil`.
            \(access)struct PartiallyGenerated: Sendable, Identifiable, LMSession.ConvertibleFromGeneratedContent {
                \(access)var id: LMSession.GenerationID
                \(partialFields.joined(separator: "\n"))
                \(access)init(_ content: LMSession.GeneratedContent) throws {
                    self.id = content.id ?? LMSession.GenerationID()
                    \(partialReads.joined(separator: "\n"))
                }
            }
            """
    }

    /// One associated value of an enum case: the property it is generated as (its label, or
    /// `value`, `value1`... for unlabeled ones in order), a binding name, its type.
    struct Payload {
        var property: String
        var binding: String
        var type: String
        var wrapped: String?
        var isLabeled: Bool
    }

    /// The enum's case names in order and each one's values.
    static func casesAndPayloads(_ enumeration: EnumDeclSyntax) -> (cases: [String], payloads: [[Payload]]) {
        var cases: [String] = []
        var payloads: [[Payload]] = []
        for member in enumeration.memberBlock.members {
            guard let decl = member.decl.as(EnumCaseDeclSyntax.self) else { continue }
            for element in decl.elements {
                cases.append(element.name.text)
                var unlabeled = 0
                payloads.append((element.parameterClause?.parameters ?? []).enumerated().map { i, p in
                    let label = p.firstName.map { $0.text == "_" ? nil : $0.text } ?? nil
                    var property = label ?? (unlabeled == 0 ? "value" : "value\(unlabeled)")
                    if label == nil { unlabeled += 1 }
                    property = backticksRemoved(property)
                    var wrapped: String?
                    if let optional = p.type.as(OptionalTypeSyntax.self) { wrapped = optional.wrappedType.trimmedDescription }
                    return Payload(property: property, binding: "v\(i)", type: p.type.trimmedDescription, wrapped: wrapped,
                                   isLabeled: label != nil)
                })
            }
        }
        return (cases, payloads)
    }

    static func enumMembers(_ enumeration: EnumDeclSyntax, owner: String, description: String, access: String) throws -> String {
        let (cases, payloads) = casesAndPayloads(enumeration)
        guard !cases.isEmpty else { throw MacroError("@Generable needs at least one case") }
        if payloads.contains(where: { !$0.isEmpty }) {
            return try enumWithPayloads(cases: cases, payloads: payloads, owner: owner, description: description, access: access)
        }
        let names = cases.map { literal(backticksRemoved($0)) }
        return """
            \(access)static var generationSchema: LMSession.GenerationSchema {
                LMSession.GenerationSchema(type: Self.self, description: \(description), anyOf: [\(names.joined(separator: ", "))])
            }
            \(access)init(_ content: LMSession.GeneratedContent) throws {
                switch try String(content) {
                \(zip(cases, names).map { "case \($1): self = .\($0)" }.joined(separator: "\n"))
                default: throw LMSession.GeneratedContentError.typeMismatch(expected: "one of \(cases.map(backticksRemoved).joined(separator: ", "))", found: content.jsonString)
                }
            }
            \(access)var generatedContent: LMSession.GeneratedContent {
                switch self {
                \(zip(cases, names).map { "case .\($0): LMSession.GeneratedContent(kind: .string(\($1)))" }.joined(separator: "\n"))
                }
            }
            """
    }

    /// An enum whose cases carry values, in Foundation Models' form: every case is a structure
    /// whose first property, `type`, names the case, followed by the case's values
    /// (`{"type":"walk","distance":3}`, `{"type":"note","value":"hi"}`, `{"type":"idle"}`; a `nil`
    /// optional is left out). The schema is a choice of one structure per case, named
    /// `Enum.DiscriminatedCase`, so guided generation tells the cases apart by the `type` string.
    static func enumWithPayloads(cases: [String], payloads: [[Payload]], owner: String, description: String, access: String) throws -> String {
        for (c, values) in zip(cases, payloads) {
            var seen: Set<String> = ["type"]
            for v in values where !seen.insert(v.property).inserted {
                throw MacroError(v.property == "type"
                    ? "@Generable: case '\(backticksRemoved(c))' has a value labeled 'type', the property that names the case"
                    : "@Generable: case '\(backticksRemoved(c))' has two values generated as '\(v.property)'")
            }
        }
        let names = cases.map { literal(backticksRemoved($0)) }
        let choices = zip(cases, payloads).map { c, values in
            let bare = backticksRemoved(c)
            let schemaName = "name + \(literal(".Discriminated" + bare.prefix(1).uppercased() + bare.dropFirst()))"
            let tag = "LMSession.DynamicGenerationSchema.Property(name: \"type\", schema: LMSession.DynamicGenerationSchema(name: \(schemaName), anyOf: [\(literal(bare))]))"
            let properties = values.map { v in
                "LMSession.DynamicGenerationSchema.Property(name: \(literal(v.property)), schema: LMSession.DynamicGenerationSchema(type: \(owner).\(alias(of: v.property, in: c)).self), isOptional: \(v.wrapped != nil))"
            }
            return "LMSession.DynamicGenerationSchema(name: \(schemaName), description: \(description), properties: [\(([tag] + properties).joined(separator: ", "))])"
        }
        let reads = zip(zip(cases, names), payloads).map { pair, values in
            let (c, name) = pair
            let arguments = values.map { v in
                let read = "try content.value(\(owner).\(alias(of: v.property, in: c))\(v.wrapped == nil ? "" : "?").self, forProperty: \(literal(v.property)))"
                return v.isLabeled ? "\(v.property): \(read)" : read
            }
            return "case \(name): self = .\(c)\(values.isEmpty ? "" : "(" + arguments.joined(separator: ", ") + ")")"
        }
        let writes = zip(zip(cases, names), payloads).map { pair, values in
            let (c, name) = pair
            let bindings = values.isEmpty ? "" : "(" + values.map { "let \($0.binding)" }.joined(separator: ", ") + ")"
            let pairs = values.map { "(\(literal($0.property)), \($0.binding))" }
            return "case .\(c)\(bindings): LMSession.GeneratedContent._enumCase(\(name), values: [\(pairs.joined(separator: ", "))])"
        }
        return """
            \(access)static var generationSchema: LMSession.GenerationSchema {
                let name = String(describing: Self.self)
                let choice = LMSession.DynamicGenerationSchema(name: name, description: \(description), anyOf: [\(choices.map { "\n" + $0 }.joined(separator: ","))
                ])
                return (try? LMSession.GenerationSchema(root: choice, dependencies: [])) ?? LMSession.GenerationSchema(type: Self.self, anyOf: [String]())
            }
            \(access)init(_ content: LMSession.GeneratedContent) throws {
                let type = try content.value(String.self, forProperty: "type")
                switch type {
                \(reads.joined(separator: "\n"))
                default: throw LMSession.GeneratedContentError.typeMismatch(expected: "one of \(cases.map(backticksRemoved).joined(separator: ", "))", found: type)
                }
            }
            \(access)var generatedContent: LMSession.GeneratedContent {
                switch self {
                \(writes.joined(separator: "\n"))
                }
            }
            """
    }

    static func backticksRemoved(_ s: String) -> String { s.filter { $0 != "`" } }

    /// `s` as a Swift string literal.
    static func literal(_ s: String) -> String {
        var out = "\""
        for c in s {
            if c == "\\" || c == "\"" { out.append("\\") }
            out.append(c)
        }
        return out + "\""
    }
}
