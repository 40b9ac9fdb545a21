extension SchemaGrammar.Builder {
    /// One step of a structure's compact JSON: fixed bytes (`{"name":`, `,"age":`, `}`), or the
    /// value of the property those bytes named.
    enum Step: Equatable {
        case literal([UInt8])
        case value(SchemaNode, optional: Bool, property: String)
    }

    /// A choice between structures explores more alternatives than this before it is refused.
    static let unionLimit = 4096

    /// The steps of a structure with `properties`, in order: literals and values alternate,
    /// the first and last steps are literals.
    static func steps(_ properties: [SchemaProperty]) -> [Step] {
        var steps: [Step] = []
        var pending: [UInt8] = [UInt8(ascii: "{")]
        for (i, p) in properties.enumerated() {
            if i > 0 { pending.append(UInt8(ascii: ",")) }
            var key = ""
            GeneratedContent.quote(p.name, into: &key)
            steps.append(.literal(pending + Array(key.utf8) + [UInt8(ascii: ":")]))
            steps.append(.value(p.node, optional: p.isOptional, property: p.name))
            pending = []
        }
        steps.append(.literal(pending + [UInt8(ascii: "}")]))
        return steps
    }

    /// A sequence node of `steps`, then `tail` if given (the node of what follows them).
    mutating func sequence(_ steps: ArraySlice<Step>, then tail: Int? = nil) throws -> Int {
        var items: [SchemaGrammar.Item] = []
        var length = 0
        for step in steps {
            switch step {
            case let .literal(bytes):
                let (item, cost) = literal(bytes)
                items.append(item)
                length += cost
            case let .value(node, optional, _):
                var value = try compile(node)
                if optional {
                    let nullTrie = trie([Array("null".utf8)])
                    let null = add(.choice(nullTrie), nullTrie.distance[0])
                    value = add(.nullable(inner: value, null: null), min(minimumLength[null], minimumLength[value]))
                }
                items.append(.value(value))
                length += minimumLength[value]
            }
        }
        if let tail {
            items.append(.value(tail))
            length += minimumLength[tail]
        }
        return add(.sequence(items), length)
    }

    /// A choice between structures (a generable enum with payloads, a dynamic `anyOf`).
    ///
    /// The structures are decoded together for as long as their JSON agrees: properties they
    /// share (same name, same shape, in the same place) are one part of the grammar, and where
    /// they part, the next bytes decide: a different property name or the structure's end, or
    /// a different value of a property whose values are spelled out (string choices, booleans,
    /// `null` for an optional one), as in tagged unions (`{"type":"circle",...}` against
    /// `{"type":"square",...}`). Refused with a typed error: choices that are not structures
    /// (unless all are strings: see ``compile(_:)``), structures that agree up to a property
    /// whose shapes then differ in any other way, and choices that take more than
    /// ``unionLimit`` alternatives to tell apart.
    mutating func compileStructureChoice(_ name: String, _ choices: [SchemaNode]) throws -> Int {
        var branches: [ArraySlice<Step>] = []
        func collect(_ nodes: [SchemaNode]) throws {
            for node in nodes {
                switch node {
                case let .object(_, _, properties): branches.append(Self.steps(properties)[...])
                case let .anyOf(_, _, inner): try collect(inner)
                default:
                    throw GenerationSchema.SchemaError.unsupportedShape(
                        "a choice (\(name)) that is neither all strings nor all structures (one is a \(node.kindName))")
                }
            }
        }
        try collect(choices)
        var budget = Self.unionLimit
        return try union(branches, choice: name, budget: &budget)
    }

    /// The node that decodes any one of `branches` (each non-empty, starting at the same point
    /// of its structure).
    private mutating func union(_ branches: [ArraySlice<Step>], choice name: String, budget: inout Int) throws -> Int {
        if branches.dropFirst().allSatisfy({ $0.elementsEqual(branches[0]) }) { return try sequence(branches[0]) }
        budget -= branches.count   // the same branch twice stays one until it ends: no need to drop copies
        guard budget >= 0 else {
            throw GenerationSchema.SchemaError.unsupportedShape(
                "a choice (\(name)) whose structures take more than \(Self.unionLimit) alternatives to tell apart")
        }
        switch branches[0].first! {
        case .literal:
            // Bytes first: group the branches by them; one group shares its bytes, several are
            // told apart by them.
            var groups: [[UInt8]: [ArraySlice<Step>]] = [:], order: [[UInt8]] = []
            for b in branches {
                guard case let .literal(bytes) = b.first! else { throw Self.misaligned(name) }
                if groups[bytes] == nil { order.append(bytes) }
                groups[bytes, default: []].append(b.dropFirst())
            }
            if order.count == 1, let rests = groups[order[0]], rests.allSatisfy({ !$0.isEmpty }) {
                return try sequence([.literal(order[0])], then: union(rests, choice: name, budget: &budget))
            }
            for a in order where order.contains(where: { $0 != a && $0.starts(with: a) }) { throw Self.misaligned(name) }
            var targets: [[UInt8]: Int] = [:], costs: [[UInt8]: Int] = [:]
            for bytes in order {
                let rests = groups[bytes]!
                if rests.allSatisfy(\.isEmpty) { continue }   // the structure ends with these bytes
                guard rests.allSatisfy({ !$0.isEmpty }) else { throw Self.misaligned(name) }
                let target = try union(rests, choice: name, budget: &budget)
                targets[bytes] = target
                costs[bytes] = minimumLength[target]
            }
            let dispatch = ChoiceTrie(order, vocabulary: vocabulary, leafCosts: costs)
            var byLeaf: [Int: Int] = [:]
            for (bytes, target) in targets { byLeaf[dispatch.leaf(bytes)] = target }
            return add(.dispatch(dispatch, targets: byLeaf), dispatch.distance[0])
        case let .value(_, _, property):
            // A value after the same bytes: shared if every branch has the same, else spelled
            // out with the bytes after it, so that the next literal step tells them apart.
            if branches.allSatisfy({ $0.first! == branches[0].first! }) {
                let rests = branches.map { $0.dropFirst() }
                guard rests.allSatisfy({ !$0.isEmpty }) else { throw Self.misaligned(name) }
                return try sequence([branches[0].first!], then: union(rests, choice: name, budget: &budget))
            }
            var spelled: [ArraySlice<Step>] = []
            for b in branches {
                guard case let .value(node, optional, _) = b.first!, let spellings = Self.spellings(node, optional: optional) else {
                    throw GenerationSchema.SchemaError.unsupportedShape(
                        "a choice (\(name)) between structures that agree up to property '\(property)' and differ in its shape "
                            + "other than by fixed values (string choices, booleans, null)")
                }
                guard case let .literal(next) = b.dropFirst().first else { throw Self.misaligned(name) }
                for spelling in spellings { spelled.append([.literal(spelling + next)] + b.dropFirst(2)) }
            }
            return try union(spelled, choice: name, budget: &budget)
        }
    }

    /// Every compact JSON text of a value of `node`, where there are a fixed few: string
    /// choices (quoted), booleans, and `null` when optional; nil for any other shape.
    static func spellings(_ node: SchemaNode, optional: Bool) -> [[UInt8]]? {
        var texts: [String]
        switch node {
        case let .string(choices?, nil):
            texts = choices.map { c in
                var quoted = ""
                GeneratedContent.quote(c, into: &quoted)
                return quoted
            }
        case .boolean: texts = ["true", "false"]
        case let .anyOf(_, _, choices):
            var all: [[UInt8]] = []
            for c in choices {
                guard let s = spellings(c, optional: false) else { return nil }
                all += s
            }
            return all + (optional ? [Array("null".utf8)] : [])
        default: return nil
        }
        if optional { texts.append("null") }
        return texts.map { Array($0.utf8) }
    }

    /// Steps that do not alternate as a structure's do (never expected).
    private static func misaligned(_ name: String) -> GenerationSchema.SchemaError {
        .unsupportedShape("a choice (\(name)) whose structures could not be aligned")
    }
}
