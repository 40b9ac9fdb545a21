extension GenerationSchema: Codable {
    /// Reads a schema written by ``encode(to:)`` (a JSON Schema subset with `x-order`).
    public init(from decoder: any Decoder) throws {
        self.init(root: try SchemaJSON(from: decoder).node())
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

    func node() throws -> SchemaNode {
        if let reference { return .reference(reference) }
        if let anyOf { return .anyOf(name: title ?? "", description: description, choices: try anyOf.map { try $0.node() }) }
        switch type {
        case "object":
            let properties = self.properties ?? [:]
            let names = order ?? properties.keys.sorted()
            let required = Set(self.required ?? names)
            return .object(name: title ?? "", description: description, properties: try names.map { name in
                guard let p = properties[name] else {
                    throw GenerationSchema.SchemaError.undefinedReferences(schema: title, references: [name])
                }
                return SchemaProperty(name: name, description: p.description, node: try p.node(), isOptional: !required.contains(name))
            })
        case "array":
            guard let items else { throw GenerationSchema.SchemaError.unsupportedShape("an array schema without items") }
            return .array(element: try items.node(), minimumCount: minItems, maximumCount: maxItems)
        case "string": return .string(choices: choices, pattern: pattern)
        case "integer": return .number(minimum: minimum, maximum: maximum, integral: true)
        case "number": return .number(minimum: minimum, maximum: maximum, integral: false)
        case "boolean": return .boolean
        default: throw GenerationSchema.SchemaError.unsupportedShape("schema type '\(type ?? "none")'")
        }
    }
}
