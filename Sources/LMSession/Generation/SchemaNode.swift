/// The shape a generated value must have: the form a ``GenerationSchema`` is compiled from
/// and the constrained decoder follows.
indirect enum SchemaNode: Sendable, Equatable {
    /// A structure whose properties are generated in this order.
    case object(name: String, description: String?, properties: [SchemaProperty])
    /// An array with optional element-count bounds.
    case array(element: SchemaNode, minimumCount: Int?, maximumCount: Int?)
    /// A string: free text, one of `choices`, or a whole match of `pattern`.
    case string(choices: [String]?, pattern: String?)
    /// A number within optional bounds; `integral` for integer types.
    case number(minimum: Double?, maximum: Double?, integral: Bool)
    /// `true` or `false`.
    case boolean
    /// One of several shapes, with a name (a generable enum with payloads, or a dynamic choice).
    case anyOf(name: String, description: String?, choices: [SchemaNode])
    /// A named schema defined elsewhere (dynamic schemas only; resolved before decoding).
    case reference(String)

    /// The node with `guide` applied, or an error naming the guide that does not fit.
    func applying(_ guide: GuideConstraint) throws -> SchemaNode {
        switch (self, guide) {
        case let (.number(lo, hi, integral), .minimum(m)): return .number(minimum: max(lo ?? m, m), maximum: hi, integral: integral)
        case let (.number(lo, hi, integral), .maximum(m)): return .number(minimum: lo, maximum: min(hi ?? m, m), integral: integral)
        case let (.string(_, pattern), .choices(c)): return .string(choices: c, pattern: pattern)
        case (.string, .pattern(nil)): throw GenerationSchema.SchemaError.patternUnavailable
        case let (.string(choices, _), .pattern(p?)):
            _ = try PatternAutomaton(p)   // rejects a pattern the decoder cannot follow, naming why
            return .string(choices: choices, pattern: p)
        case let (.array(e, lo, hi), .minimumCount(n)): return .array(element: e, minimumCount: max(lo ?? n, n), maximumCount: hi)
        case let (.array(e, lo, hi), .maximumCount(n)): return .array(element: e, minimumCount: lo, maximumCount: min(hi ?? n, n))
        case let (.array(e, lo, hi), .element(guides)):
            return .array(element: try guides.reduce(e) { try $0.applying($1) }, minimumCount: lo, maximumCount: hi)
        default: throw GenerationSchema.SchemaError.guideDoesNotApply(guide: "\(guide)", schema: kindName)
        }
    }

    var kindName: String {
        switch self {
        case let .object(name, _, _): "structure \(name)"
        case .array: "array"
        case .string: "string"
        case let .number(_, _, integral): integral ? "integer" : "number"
        case .boolean: "boolean"
        case let .anyOf(name, _, _): "choice \(name)"
        case let .reference(name): "reference to \(name)"
        }
    }
}

extension SchemaNode {
    /// Why a schema of this root is refused for its extent, or nil: values nested deeper than
    /// ``GenerationSchema/nestingLimit``, or more than ``GenerationSchema/valueLimit`` of them
    /// (a node reached along several paths counts once per path). Measured without recursion,
    /// so a tree of any depth is measured safely, and in at most `valueLimit` steps.
    var extentProblem: GenerationSchema.SchemaError? {
        var pending: [(node: SchemaNode, depth: Int)] = [(self, 1)]
        var values = 0
        while let (node, depth) = pending.popLast() {
            values += 1
            if let problem = Self.extentProblem(depth: depth, values: values) { return problem }
            switch node {
            case let .object(_, _, properties): pending += properties.map { ($0.node, depth + 1) }
            case let .array(element, _, _): pending.append((element, depth + 1))
            case let .anyOf(_, _, choices): pending += choices.map { ($0, depth + 1) }
            case .string, .number, .boolean, .reference: break
            }
        }
        return nil
    }

    /// The error for a value at `depth` that is the `values`-th one seen, or nil while both are within the limits.
    static func extentProblem(depth: Int, values: Int) -> GenerationSchema.SchemaError? {
        depth > GenerationSchema.nestingLimit ? .nestedTooDeep : values > GenerationSchema.valueLimit ? .tooManyValues : nil
    }
}

extension GenerationSchema.SchemaError {
    /// A schema nested deeper than ``GenerationSchema/nestingLimit``.
    static var nestedTooDeep: Self {
        .unsupportedShape("a schema nested more than \(GenerationSchema.nestingLimit) levels deep (structures, arrays and choices)")
    }

    /// A schema of more than ``GenerationSchema/valueLimit`` values.
    static var tooManyValues: Self {
        .unsupportedShape("a schema of more than \(GenerationSchema.valueLimit) values (a schema referred to from several places counts at each)")
    }
}

/// One property of a structure.
struct SchemaProperty: Sendable, Equatable {
    var name: String
    var description: String?
    var node: SchemaNode
    /// Whether the value may be `null`.
    var isOptional: Bool
}

/// What a ``GenerationGuide`` asks of a value.
enum GuideConstraint: Sendable, Equatable, CustomStringConvertible {
    case minimum(Double)
    case maximum(Double)
    case choices([String])
    /// `nil`: the regex has no pattern text the decoder could follow.
    case pattern(String?)
    case minimumCount(Int)
    case maximumCount(Int)
    case element([GuideConstraint])

    var description: String {
        switch self {
        case let .minimum(v): "minimum(\(v))"
        case let .maximum(v): "maximum(\(v))"
        case let .choices(c): "anyOf(\(c))"
        case let .pattern(p): "pattern(/\(p ?? "?")/)"
        case let .minimumCount(n): "minimumCount(\(n))"
        case let .maximumCount(n): "maximumCount(\(n))"
        case let .element(g): "element(\(g))"
        }
    }
}
