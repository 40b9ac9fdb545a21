/// The shape of a value guided generation produces: structures with ordered properties,
/// arrays, strings (free, chosen, or patterned), numbers with bounds, Booleans.
///
/// Built by the ``Generable(description:)`` macro, by hand from ``Property`` values, or
/// from a ``DynamicGenerationSchema``. Codable as a JSON Schema (with `x-order` keeping
/// the property order).
public struct GenerationSchema: Sendable, Equatable, CustomDebugStringConvertible {
    let root: SchemaNode
    /// A problem found while building (a guide that does not apply); reported when the schema is used.
    let problem: SchemaError?

    /// How deep a schema's values may nest (each structure, array and choice is a level; the
    /// root is the first). Deeper schemas are refused with ``SchemaError/unsupportedShape(_:)``:
    /// building, rendering and compiling a schema recurse once a level, and this depth fits a
    /// 512 KiB thread stack (Apple's secondary threads) with room to spare.
    public static let nestingLimit = 32

    /// How many values a schema may hold, counted as decoding visits them: a schema reached along
    /// several paths (a dependency referred to from several places) counts once per path. Larger
    /// schemas are refused with ``SchemaError/unsupportedShape(_:)``, so that references that
    /// double at every level cannot expand into millions of values.
    public static let valueLimit = 10_000

    /// A schema of `root`, or, when `root` is beyond ``nestingLimit`` or ``valueLimit``, an empty
    /// structure of the root's name holding that problem (so nothing walks the oversized tree
    /// again; using the schema throws the problem).
    init(root: SchemaNode, problem: SchemaError? = nil) {
        if let extent = root.extentProblem {
            self.root = .object(name: GenerationSchema.name(of: root), description: nil, properties: [])
            self.problem = problem ?? extent
        } else {
            self.root = root
            self.problem = problem
        }
    }

    /// One property of a structure schema.
    public struct Property: Sendable {
        let property: SchemaProperty
        let problem: SchemaError?

        /// A property of type `type` with guides on its value.
        public init<Value: Generable>(name: String, description: String? = nil, type: Value.Type,
                                      guides: [GenerationGuide<Value>] = []) {
            (property, problem) = Self.make(name, description, Value.generationSchema, guides.flatMap(\.constraints), optional: false)
        }

        /// An optional property: the model may write `null` for it.
        public init<Value: Generable>(name: String, description: String? = nil, type: Value?.Type,
                                      guides: [GenerationGuide<Value>] = []) {
            (property, problem) = Self.make(name, description, Value.generationSchema, guides.flatMap(\.constraints), optional: true)
        }

        /// A string property that must wholly match `guides` (regex literals).
        public init<RegexOutput>(name: String, description: String? = nil, type: String.Type,
                                 guides: [Regex<RegexOutput>] = []) {
            let constraints = guides.map { GuideConstraint.pattern($0._literalPattern) }
            (property, problem) = Self.make(name, description, String.generationSchema, constraints, optional: false)
        }

        private static func make(_ name: String, _ description: String?, _ schema: GenerationSchema,
                                 _ constraints: [GuideConstraint], optional: Bool) -> (SchemaProperty, SchemaError?) {
            do {
                let node = try constraints.reduce(schema.root) { try $0.applying($1) }
                return (SchemaProperty(name: name, description: description, node: node, isOptional: optional), schema.problem)
            } catch {
                let problem = (error as? SchemaError) ?? .guideDoesNotApply(guide: "\(constraints)", schema: name)
                return (SchemaProperty(name: name, description: description, node: schema.root, isOptional: optional), problem)
            }
        }
    }

    /// A structure schema for `type` with `properties` generated in this order.
    public init(type: any Generable.Type, description: String? = nil, properties: [Property]) {
        var problem = properties.lazy.compactMap(\.problem).first
        var seen = Set<String>()
        for p in properties where !seen.insert(p.property.name).inserted {
            problem = problem ?? .duplicateProperty(schema: Self.name(of: type), property: p.property.name)
        }
        self.init(root: .object(name: Self.name(of: type), description: description, properties: properties.map(\.property)),
                  problem: problem)
    }

    /// A string schema whose value is one of `choices` (a generable enum).
    public init(type: any Generable.Type, description: String? = nil, anyOf choices: [String]) {
        self.init(root: .string(choices: choices, pattern: nil),
                  problem: choices.isEmpty ? .emptyTypeChoices(schema: Self.name(of: type)) : nil)
    }

    /// A schema whose value has the shape of one of `types`.
    public init(type: any Generable.Type, description: String? = nil, anyOf types: [any Generable.Type]) {
        let schemas = types.map { $0.generationSchema }
        self.init(root: .anyOf(name: Self.name(of: type), description: description, choices: schemas.map(\.root)),
                  problem: types.isEmpty ? .emptyTypeChoices(schema: Self.name(of: type)) : schemas.lazy.compactMap(\.problem).first)
    }

    /// A schema built at run time: `root`, whose references name schemas in `dependencies`.
    /// - Throws: ``SchemaError`` for a reference to no dependency, a name defined twice, a
    ///   reference cycle, a guide that does not apply, or a schema nested deeper than
    ///   ``nestingLimit`` or holding more than ``valueLimit`` values once its references are expanded.
    public init(root: DynamicGenerationSchema, dependencies: [DynamicGenerationSchema]) throws {
        var named: [String: DynamicGenerationSchema] = [:]
        for d in dependencies {
            guard let name = d.name else { continue }
            guard named.updateValue(d, forKey: name) == nil else { throw SchemaError.duplicateType(schema: name) }
        }
        var budget = Self.valueLimit
        self.init(root: try root.resolve(named, visiting: [], depth: 1, budget: &budget))
        if let problem { throw problem }   // the limits, passed with fixed schemas inside
    }

    static func name(of type: any Any.Type) -> String { String(describing: type) }

    /// The root's name (a structure's or choice's type name), or its kind.
    var name: String { Self.name(of: root) }

    /// `node`'s name (a structure's or choice's type name), or its kind.
    static func name(of node: SchemaNode) -> String {
        switch node {
        case let .object(name, _, _) where !name.isEmpty, let .anyOf(name, _, _) where !name.isEmpty: name
        default: node.kindName
        }
    }

    /// The schema as compact text, as the model reads it in a prompt.
    public var debugDescription: String { SchemaText.render(root) }

    /// Why a schema cannot be built or used.
    public enum SchemaError: Error, Equatable, CustomStringConvertible {
        /// Two properties of one structure share a name.
        case duplicateProperty(schema: String, property: String)
        /// Two dependencies share a name.
        case duplicateType(schema: String)
        /// A choice schema has nothing to choose from.
        case emptyTypeChoices(schema: String)
        /// References to schemas that are not among the dependencies.
        case undefinedReferences(schema: String?, references: [String])
        /// References that lead back to themselves (the decoder needs a finite shape).
        case recursiveReference(String)
        /// A guide was put on a value it cannot constrain.
        case guideDoesNotApply(guide: String, schema: String)
        /// A pattern guide whose regex has no pattern text (built with RegexBuilder).
        case patternUnavailable
        /// A pattern the decoder cannot follow (the reason names the construct).
        case unsupportedPattern(String, reason: String)
        /// A schema shape the constrained decoder does not follow.
        case unsupportedShape(String)

        /// A sentence naming the problem.
        public var description: String {
            switch self {
            case let .duplicateProperty(schema, property): "schema \(schema) declares property '\(property)' twice"
            case let .duplicateType(schema): "two dependencies are named \(schema)"
            case let .emptyTypeChoices(schema): "schema \(schema) offers no choices"
            case let .undefinedReferences(schema, references):
                "schema \(schema ?? "(root)") refers to undefined \(references.joined(separator: ", "))"
            case let .recursiveReference(name): "schema \(name) refers to itself; guided generation needs a finite shape"
            case let .guideDoesNotApply(guide, schema): "guide \(guide) does not apply to \(schema)"
            case .patternUnavailable: "the pattern guide's regex has no pattern text (use a regex literal or Regex(String))"
            case let .unsupportedPattern(pattern, reason): "pattern /\(pattern)/ cannot be followed while decoding: \(reason)"
            case let .unsupportedShape(what): "guided generation does not support \(what)"
            }
        }
    }
}
