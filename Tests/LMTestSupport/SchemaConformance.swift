import Foundation
import LMSession

/// Checks a generated value against a schema in its JSON Schema form (what `GenerationSchema`
/// encodes to), without the package's schema types or its decoder: the schema is read as plain
/// JSON, patterns by Swift's own `Regex` (matching Unicode scalars, as the package does), bounds
/// by plain comparisons. Used by the tests and the
/// fuzz targets as an oracle for "guided output is always valid".
///
/// The package's contract is stricter than JSON Schema's on structures: every property is
/// written, in `x-order` order, an optional one as `null` when it is left out.
public enum SchemaConformance {
    /// Whether a match must hold under `Regex`'s default (grapheme-cluster) semantics as well:
    /// the package's wildcards produce only characters of their own, so only what the pattern
    /// itself names beyond ASCII can join a neighbour (a combining mark as a literal, a range
    /// that holds some). Conservatively: every non-ASCII scalar of the pattern is a character of
    /// its own between letters, and none is the end of a range; and no carriage return, which
    /// before a line feed makes one character of the two.
    public static func graphemesToo(_ pattern: String) -> Bool {
        guard !pattern.contains("\\r"), !pattern.unicodeScalars.contains("\r") else { return false }
        let scalars = Array(pattern.unicodeScalars)
        for (i, c) in scalars.enumerated() where !c.isASCII {
            let alone = ("a" + String(Character(c)) + "a").count == 3
            let inRange = (i > 0 && scalars[i - 1] == "-") || (i + 1 < scalars.count && scalars[i + 1] == "-")
            if !alone || inRange { return false }
        }
        return true
    }

    /// Why a value cannot be checked: the schema uses something this checker does not read.
    public struct Unchecked: Error, CustomStringConvertible {
        /// What the checker met.
        public let description: String
    }

    /// The first way `value` breaks `schema` (a path such as `$.items[2]` and what is wrong), or
    /// `nil` when it conforms.
    /// - Throws: ``Unchecked`` for a schema part the checker does not read (`$ref`, a pattern
    ///   Swift's `Regex` does not compile, an unknown type).
    public static func problem(_ value: GeneratedContent, schema: GeneratedContent, path: String = "$") throws -> String? {
        guard case let .structure(fields, _) = schema.kind else { throw Unchecked(description: "\(path): the schema is not an object") }
        if fields["$ref"] != nil { throw Unchecked(description: "\(path): a reference") }
        if case let .array(choices)? = fields["anyOf"]?.kind {
            for choice in choices where try problem(value, schema: choice, path: path) == nil { return nil }
            return "\(path): \(value.jsonString) matches none of \(choices.count) choices"
        }
        guard case let .string(type)? = fields["type"]?.kind else { throw Unchecked(description: "\(path): no type") }
        switch (type, value.kind) {
        case let ("object", .structure(properties, keys)):
            return try objectProblem(properties, keys, fields, path)
        case let ("array", .array(items)):
            if let lo = number(fields["minItems"]), Double(items.count) < lo { return "\(path): \(items.count) items, minimum \(lo)" }
            if let hi = number(fields["maxItems"]), Double(items.count) > hi { return "\(path): \(items.count) items, maximum \(hi)" }
            guard let element = fields["items"] else { throw Unchecked(description: "\(path): an array without items") }
            for (i, item) in items.enumerated() {
                if let p = try problem(item, schema: element, path: "\(path)[\(i)]") { return p }
            }
            return nil
        case let ("string", .string(s)):
            if case let .array(choices)? = fields["enum"]?.kind, !choices.contains(where: { $0.kind == .string(s) }) {
                return "\(path): \(value.jsonString) is not one of the enum's \(choices.count) strings"
            }
            if case let .string(pattern)? = fields["pattern"]?.kind {
                // By characters, `Regex`'s default, unless the pattern itself names what joins a
                // neighbour (see `graphemesToo`); then scalar by scalar, as the package matches. (For
                // the rest the two agree, but for a quirk of Swift's scalar semantics: `\w` that
                // takes a digit or `_` refuses to go on to a non-ASCII scalar, `/\w€/` on "9€".)
                guard let regex = try? Regex(pattern) else { throw Unchecked(description: "\(path): pattern /\(pattern)/") }
                let byCharacters = graphemesToo(pattern)
                if (try? (byCharacters ? regex : regex.matchingSemantics(.unicodeScalar)).wholeMatch(in: s)) == nil {
                    return "\(path): \(value.jsonString) does not match /\(pattern)/\(byCharacters ? "" : " scalar by scalar")"
                }
            }
            return nil
        case let ("integer", .number(n)), let ("number", .number(n)):
            if type == "integer", n != n.rounded() { return "\(path): \(n) is not whole" }
            if let lo = number(fields["minimum"]), n < lo { return "\(path): \(n) below the minimum \(lo)" }
            if let hi = number(fields["maximum"]), n > hi { return "\(path): \(n) above the maximum \(hi)" }
            return nil
        case ("boolean", .bool): return nil
        case ("object", _), ("array", _), ("string", _), ("integer", _), ("number", _), ("boolean", _):
            return "\(path): \(value.jsonString) is not of type \(type)"
        default: throw Unchecked(description: "\(path): type \(type)")
        }
    }

    /// Every property written in `x-order` order (the properties' names sorted without it); a
    /// required one conforming, an optional one `null` or conforming.
    private static func objectProblem(_ properties: [String: GeneratedContent], _ keys: [String],
                                      _ fields: [String: GeneratedContent], _ path: String) throws -> String? {
        var declared: [String: GeneratedContent] = [:]
        if case let .structure(byName, _)? = fields["properties"]?.kind { declared = byName }
        let order = strings(fields["x-order"]) ?? declared.keys.sorted()
        guard keys == order else { return "\(path): keys \(keys), expected \(order)" }
        let required = Set(strings(fields["required"]) ?? order)
        for name in order {
            guard let schema = declared[name] else { throw Unchecked(description: "\(path): \(name) is ordered but not declared") }
            let property = properties[name]!
            if !required.contains(name), property.kind == .null { continue }
            if let p = try problem(property, schema: schema, path: path + "." + name) { return p }
        }
        return nil
    }

    private static func number(_ content: GeneratedContent?) -> Double? {
        if case let .number(n)? = content?.kind { n } else { nil }
    }

    private static func strings(_ content: GeneratedContent?) -> [String]? {
        guard case let .array(items)? = content?.kind else { return nil }
        return items.compactMap { if case let .string(s) = $0.kind { s } else { nil } }
    }
}
