extension GenerationSchema: Codable {
    /// Reads a schema written by ``encode(to:)`` (a JSON Schema subset with `x-order`).
    public init(from decoder: any Decoder) throws {
        let json = try SchemaJSON.$rootPathLength.withValue(decoder.codingPath.count) { try SchemaJSON(from: decoder) }
        self.init(root: try json.node(depth: 1))
    }

    /// Writes the schema as JSON Schema: `type`, `properties` with `required` and `x-order`
    /// (the generation order), `items` with `minItems`/`maxItems`, `enum`, `pattern`,
    /// `minimum`/`maximum`, `anyOf`.
    public func encode(to encoder: any Encoder) throws {
        try SchemaJSON(root).encode(to: encoder)
    }
}

/// The JSON Schema form of a node.
final class SchemaJSON: Codable {
    var type: String?
    var title: String?
    var description: String?
    var properties: [String: SchemaJSON]?
    var required: [String]?
    var order: [String]?
    var items: SchemaJSON?
    var minItems: Int?
    var maxItems: Int?
    var choices: [String]?
    var pattern: String?
    var minimum: Double?
    var maximum: Double?
    var anyOf: [SchemaJSON]?
    var reference: String?

    enum CodingKeys: String, CodingKey {
        case type, title, description, properties, required, items, minItems, maxItems, pattern, minimum, maximum, anyOf
        case order = "x-order", choices = "enum", reference = "$ref"
    }

    /// The length of the coding path at the root of the schema being decoded (a schema may sit
    /// inside a transcript or another document).
    @TaskLocal static var rootPathLength = 0

    /// Decodes the fields, refusing a schema nested deeper than ``GenerationSchema/nestingLimit``
    /// before reading the level beyond it (each level adds one or two keys to the coding path:
    /// `items`, or `properties` and a name, or `anyOf` and an index), so that decoding recurses
    /// boundedly whatever the input.
    required init(from decoder: any Decoder) throws {
        guard decoder.codingPath.count - Self.rootPathLength <= 2 * GenerationSchema.nestingLimit else {
            throw GenerationSchema.SchemaError.nestedTooDeep
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        type = try c.decodeIfPresent(String.self, forKey: .type)
        title = try c.decodeIfPresent(String.self, forKey: .title)
        description = try c.decodeIfPresent(String.self, forKey: .description)
        properties = try c.decodeIfPresent([String: SchemaJSON].self, forKey: .properties)
        required = try c.decodeIfPresent([String].self, forKey: .required)
        order = try c.decodeIfPresent([String].self, forKey: .order)
        items = try c.decodeIfPresent(SchemaJSON.self, forKey: .items)
        minItems = try c.decodeIfPresent(Int.self, forKey: .minItems)
        maxItems = try c.decodeIfPresent(Int.self, forKey: .maxItems)
        choices = try c.decodeIfPresent([String].self, forKey: .choices)
        pattern = try c.decodeIfPresent(String.self, forKey: .pattern)
        minimum = try c.decodeIfPresent(Double.self, forKey: .minimum)
        maximum = try c.decodeIfPresent(Double.self, forKey: .maximum)
        anyOf = try c.decodeIfPresent([SchemaJSON].self, forKey: .anyOf)
        reference = try c.decodeIfPresent(String.self, forKey: .reference)
    }

    init(_ node: SchemaNode) {
        switch node {
        case let .object(name, description, properties):
            type = "object"
            title = name.isEmpty ? nil : name
            self.description = description
            var byName: [String: SchemaJSON] = [:]
            for p in properties {
                let child = SchemaJSON(p.node)
                child.description = p.description ?? child.description
                byName[p.name] = child
            }
            self.properties = byName
            order = properties.map(\.name)
            required = properties.filter { !$0.isOptional }.map(\.name)
        case let .array(element, lo, hi):
            type = "array"
            items = SchemaJSON(element)
            minItems = lo
            maxItems = hi
        case let .string(choices, pattern):
            type = "string"
            self.choices = choices
            self.pattern = pattern
        case let .number(lo, hi, integral):
            type = integral ? "integer" : "number"
            minimum = lo
            maximum = hi
        case .boolean: type = "boolean"
        case let .anyOf(name, description, choices):
            title = name.isEmpty ? nil : name
            self.description = description
            anyOf = choices.map(SchemaJSON.init)
        case let .reference(name): reference = name
        }
    }

    /// The node this JSON describes, at `depth` (the root is 1); past ``GenerationSchema/nestingLimit`` it throws.
    func node(depth: Int) throws -> SchemaNode {
        guard depth <= GenerationSchema.nestingLimit else { throw GenerationSchema.SchemaError.nestedTooDeep }
        if let reference { return .reference(reference) }
        if let anyOf { return .anyOf(name: title ?? "", description: description, choices: try anyOf.map { try $0.node(depth: depth + 1) }) }
        switch type {
        case "object":
            let properties = self.properties ?? [:]
            let names = order ?? properties.keys.sorted()
            let required = Set(self.required ?? names)
            return .object(name: title ?? "", description: description, properties: try names.map { name in
                guard let p = properties[name] else {
                    throw GenerationSchema.SchemaError.undefinedReferences(schema: title, references: [name])
                }
                return SchemaProperty(name: name, description: p.description, node: try p.node(depth: depth + 1), isOptional: !required.contains(name))
            })
        case "array":
            guard let items else { throw GenerationSchema.SchemaError.unsupportedShape("an array schema without items") }
            return .array(element: try items.node(depth: depth + 1), minimumCount: minItems, maximumCount: maxItems)
        case "string": return .string(choices: choices, pattern: pattern)
        case "integer": return .number(minimum: minimum, maximum: maximum, integral: true)
        case "number": return .number(minimum: minimum, maximum: maximum, integral: false)
        case "boolean": return .boolean
        default: throw GenerationSchema.SchemaError.unsupportedShape("schema type '\(type ?? "none")'")
        }
    }
}
