/// Renders a schema as the compact text a prompt carries: JSON-like, properties in order,
/// guides and descriptions inline, e.g.
/// `{"name": string (the user's name), "age": integer 0...120, "tags": [string] (2...3 items)}`.
enum SchemaText {
    static func render(_ node: SchemaNode) -> String {
        var out = ""
        write(node, into: &out)
        return out
    }

    private static func write(_ node: SchemaNode, into out: inout String) {
        switch node {
        case let .object(_, _, properties):
            out += "{"
            for (i, p) in properties.enumerated() {
                if i > 0 { out += ", " }
                GeneratedContent.quote(p.name, into: &out)
                out += ": "
                write(p.node, into: &out)
                if p.isOptional { out += " or null" }
                if let d = p.description { out += " (\(d))" }
            }
            out += "}"
        case let .array(element, lo, hi):
            out += "["
            write(element, into: &out)
            out += "]"
            switch (lo, hi) {
            case let (l?, h?) where l == h: out += " (\(l) items)"
            case let (l?, h?): out += " (\(l)...\(h) items)"
            case let (l?, nil): out += " (at least \(l) items)"
            case let (nil, h?): out += " (at most \(h) items)"
            case (nil, nil): break
            }
        case let .string(choices?, _):
            out += choices.map { c -> String in
                var q = ""
                GeneratedContent.quote(c, into: &q)
                return q
            }.joined(separator: " | ")
        case let .string(nil, pattern):
            out += "string"
            if let pattern { out += " matching /\(pattern)/" }
        case let .number(lo, hi, integral):
            out += integral ? "integer" : "number"
            switch (lo, hi) {
            case let (l?, h?): out += " \(GeneratedContent.format(l))...\(GeneratedContent.format(h))"
            case let (l?, nil): out += " ≥ \(GeneratedContent.format(l))"
            case let (nil, h?): out += " ≤ \(GeneratedContent.format(h))"
            case (nil, nil): break
            }
        case .boolean: out += "boolean"
        case let .anyOf(_, _, choices):
            for (i, c) in choices.enumerated() {
                if i > 0 { out += " | " }
                write(c, into: &out)
            }
        case let .reference(name): out += name
        }
    }
}
