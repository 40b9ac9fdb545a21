/// A schema put together at run time (from a server's description, a user's form...),
/// turned into a ``GenerationSchema`` with ``GenerationSchema/init(root:dependencies:)``.
public struct DynamicGenerationSchema: Sendable {
    indirect enum Body: Sendable {
        case structure([Property])
        case stringChoices([String])
        case choices([DynamicGenerationSchema])
        case array(DynamicGenerationSchema, minimum: Int?, maximum: Int?)
        case fixed(SchemaNode, SchemaError: GenerationSchema.SchemaError?)
        case reference(String)
    }

    let name: String?
    let description: String?
    let body: Body

    /// A property of a dynamic structure.
    public struct Property: Sendable {
        let name: String
        let description: String?
        let schema: DynamicGenerationSchema
        let isOptional: Bool

        /// A property named `name` whose value follows `schema`; optional ones may be `null`.
        public init(name: String, description: String? = nil, schema: DynamicGenerationSchema, isOptional: Bool = false) {
            self.name = name
            self.description = description
            self.schema = schema
            self.isOptional = isOptional
        }
    }

    /// A structure named `name` with `properties` in this order.
    public init(name: String, description: String? = nil, properties: [Property]) {
        self.name = name
        self.description = description
        body = .structure(properties)
    }

    /// A value with the shape of one of `choices`.
    public init(name: String, description: String? = nil, anyOf choices: [DynamicGenerationSchema]) {
        self.name = name
        self.description = description
        body = .choices(choices)
    }

    /// A string that is one of `choices`.
    public init(name: String, description: String? = nil, anyOf choices: [String]) {
        self.name = name
        self.description = description
        body = .stringChoices(choices)
    }

    /// An array of values following `itemSchema`, with optional bounds on its length.
    public init(arrayOf itemSchema: DynamicGenerationSchema, minimumElements: Int? = nil, maximumElements: Int? = nil) {
        name = nil
        description = nil
        body = .array(itemSchema, minimum: minimumElements, maximum: maximumElements)
    }

    /// The schema of a generable type, with guides.
    public init<Value: Generable>(type: Value.Type, guides: [GenerationGuide<Value>] = []) {
        name = nil
        description = nil
        let schema = Value.generationSchema
        do {
            body = .fixed(try guides.flatMap(\.constraints).reduce(schema.root) { try $0.applying($1) }, SchemaError: schema.problem)
        } catch {
            body = .fixed(schema.root, SchemaError: (error as? GenerationSchema.SchemaError) ?? schema.problem)
        }
    }

    /// A reference to a schema named `name` among the dependencies.
    public init(referenceTo name: String) {
        self.name = nil
        description = nil
        body = .reference(name)
    }

    /// The schema as a node at `depth` (the root is 1), references replaced by the dependencies
    /// they name. Each value takes one from `budget`; past ``GenerationSchema/nestingLimit`` or
    /// with the budget spent it throws, before recursing further or expanding more references.
    func resolve(_ named: [String: DynamicGenerationSchema], visiting: Set<String>, depth: Int,
                 budget: inout Int) throws -> SchemaNode {
        if case .reference = body {} else {   // a reference stands for its target, at the same depth
            budget -= 1
            if let problem = SchemaNode.extentProblem(depth: depth, values: GenerationSchema.valueLimit - budget) { throw problem }
        }
        switch body {
        case let .structure(properties):
            var seen = Set<String>()
            return .object(name: name ?? "", description: description, properties: try properties.map { p in
                guard seen.insert(p.name).inserted else {
                    throw GenerationSchema.SchemaError.duplicateProperty(schema: name ?? "", property: p.name)
                }
                return SchemaProperty(name: p.name, description: p.description,
                                      node: try p.schema.resolve(named, visiting: visiting, depth: depth + 1, budget: &budget),
                                      isOptional: p.isOptional)
            })
        case let .stringChoices(choices):
            guard !choices.isEmpty else { throw GenerationSchema.SchemaError.emptyTypeChoices(schema: name ?? "") }
            return .string(choices: choices, pattern: nil)
        case let .choices(choices):
            guard !choices.isEmpty else { throw GenerationSchema.SchemaError.emptyTypeChoices(schema: name ?? "") }
            return .anyOf(name: name ?? "", description: description,
                          choices: try choices.map { try $0.resolve(named, visiting: visiting, depth: depth + 1, budget: &budget) })
        case let .array(item, minimum, maximum):
            return .array(element: try item.resolve(named, visiting: visiting, depth: depth + 1, budget: &budget),
                          minimumCount: minimum, maximumCount: maximum)
        case let .fixed(node, problem):
            if let problem { throw problem }
            return node
        case let .reference(target):
            guard let schema = named[target] else {
                throw GenerationSchema.SchemaError.undefinedReferences(schema: name, references: [target])
            }
            guard !visiting.contains(target) else { throw GenerationSchema.SchemaError.recursiveReference(target) }
            return try schema.resolve(named, visiting: visiting.union([target]), depth: depth, budget: &budget)
        }
    }
}
