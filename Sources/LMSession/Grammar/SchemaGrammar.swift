/// A schema compiled for decoding: the byte-level grammar of its compact JSON, with what
/// finishing each part costs in tokens of one vocabulary.
///
/// Objects are sequences of literal bytes (`{"name":`, `,"age":`, `}`) and value slots, in
/// declaration order; arrays, strings, numbers and choices are their own nodes. The text is
/// compact: no whitespace anywhere outside strings (a grammar that allows whitespace lets
/// a model pad until its budget runs out). Free strings take JSON's escapes (see
/// `GrammarState.feedString`); strings with a pattern take the two-byte escapes of the
/// characters the pattern matches (`\"`, `\\`, `\t`, `\n`, `\r`: see `PatternAutomaton`).
final class SchemaGrammar: Sendable {
    enum Item: Sendable {
        /// Fixed bytes, and the fewest tokens that spell each suffix (`costs[p]` for `bytes[p...]`).
        case literal([UInt8], costs: [Int])
        /// A value; as a sequence's last item, what follows the sequence's own bytes (the rest
        /// of structures decoded together, see `SchemaGrammar+Union.swift`).
        case value(Int)
    }

    enum Node: Sendable {
        /// An object: literal bytes and value slots in order.
        case sequence([Item])
        /// Free text between quotes.
        case string
        /// Text between quotes that wholly matches a pattern.
        case pattern(PatternAutomaton)
        /// One of fixed byte strings (quoted choices, `true`/`false`, `null`).
        case choice(ChoiceTrie)
        /// `null` or the inner node.
        case nullable(inner: Int, null: Int)
        /// One of fixed prefixes, each followed by its own node (a tool call: ` name ` then
        /// that tool's arguments), or by nothing where a leaf has no target (a structure that
        /// ends with its prefix: see `SchemaGrammar+Union.swift`).
        case dispatch(ChoiceTrie, targets: [Int: Int])
        /// One of several nodes, picked by the value's first byte (each node's own bytes; the
        /// byte then goes to it).
        case peek([(first: ByteSet, node: Int)])
        /// Text between quotes of any of several shapes read together, each ending followed by
        /// its own node, or by nothing where it has no target (see `TextUnion`).
        case text(TextUnion, targets: [Int: Int])
        /// A number under one rule, or under several read together (a choice's ranges, whole or
        /// not: see `SchemaGrammar+Union.swift`). Once it ends, the rules it satisfies (a bit
        /// mask) pick the node that follows, or nothing where the mask has no target; `after[r]`
        /// bounds the shortest of what follows once rule `r` is among them.
        case numbers([NumberRule], after: [Int], targets: [Int: Int])
        /// The rest of an array from just after its `[` (`from` 1) or just after an element (2):
        /// `counts[i]` is a range of elements still to come, then `]`. An array is `[` and this,
        /// with one range and no target. Where a choice reads arrays together (their brackets and
        /// commas are its own bytes: see `SchemaGrammar+Union.swift`), each range is some branches';
        /// at `]` the ranges the count is in (a bit mask) pick the node that follows, or nothing
        /// where the mask has no target; `after[i]` bounds the shortest of what follows once range
        /// `i` is among them.
        case counted(element: Int, from: Int, counts: [ClosedRange<Int>], after: [Int], targets: [Int: Int])
    }

    let nodes: [Node]
    /// An upper bound on the fewest tokens a complete value of each node takes (the cost
    /// model ``GrammarState/remaining`` uses; see there).
    let minimumLength: [Int]
    let root: Int

    init(_ schema: GenerationSchema, vocabulary: TokenVocabulary) throws {
        if let problem = schema.problem { throw problem }
        var builder = Builder(vocabulary: vocabulary)
        root = try builder.compile(schema.root)
        nodes = builder.nodes
        minimumLength = builder.minimumLength
    }

    /// The grammar of a tool call's body: ` name ` (one of `tools`), then that tool's
    /// arguments as compact JSON under its parameters schema; or, for JSON calls,
    /// `{"name":"name","arguments":` (or `"parameters":`) then the arguments and `}` (Mistral's
    /// calls in a list of one: `[{…}]`).
    init(toolCalls tools: [(name: String, parameters: GenerationSchema)], format: PromptRenderer.CallFormat = .plain,
         vocabulary: TokenVocabulary) throws {
        var builder = Builder(vocabulary: vocabulary)
        var leafCosts: [[UInt8]: Int] = [:], targets: [[UInt8]: Int] = [:]
        for tool in tools {
            if let problem = tool.parameters.problem { throw problem }
            let prefix = Array((format.jsonOpening(name: tool.name) ?? " \(tool.name) ").utf8)
            guard targets[prefix] == nil else { continue }
            var node = try builder.compile(tool.parameters.root)
            if let closing = format.jsonClosing {   // the object's closing brace (and the list's bracket) after the arguments
                let (brace, cost) = builder.literal(Array(closing.utf8))
                node = builder.add(.sequence([.value(node), brace]), builder.minimumLength[node] + cost)
            }
            targets[prefix] = node
            leafCosts[prefix] = builder.minimumLength[node]
        }
        guard !targets.isEmpty else { throw GenerationSchema.SchemaError.unsupportedShape("a tool call with no tools offered") }
        let trie = ChoiceTrie(Array(targets.keys), vocabulary: vocabulary, leafCosts: leafCosts)
        var byLeaf: [Int: Int] = [:]
        for (prefix, node) in targets { byLeaf[trie.leaf(prefix)] = node }
        root = builder.add(.dispatch(trie, targets: byLeaf), trie.distance[0])
        nodes = builder.nodes
        minimumLength = builder.minimumLength
    }

    struct Builder {
        let vocabulary: TokenVocabulary
        var nodes: [Node] = []
        var minimumLength: [Int] = []
        /// The branches of the choices being compiled, outermost first (see `SchemaGrammar+Union.swift`).
        var unionsUnderway: [[ArraySlice<Step>]] = []

        /// The fewest tokens that spell each suffix of `bytes` (dynamic programming from the
        /// end; every byte has a token of its own, so each suffix has a spelling).
        func costs(_ bytes: [UInt8]) -> [Int] {
            var cost = [Int](repeating: Int.max, count: bytes.count + 1)
            cost[bytes.count] = 0
            for i in stride(from: bytes.count - 1, through: 0, by: -1) {
                for t in vocabulary.byFirstByte[Int(bytes[i])] {
                    let piece = vocabulary.bytes[Int(t)]
                    guard piece.count <= bytes.count - i, bytes[i ..< i + piece.count].elementsEqual(piece),
                          cost[i + piece.count] != Int.max else { continue }
                    cost[i] = min(cost[i], cost[i + piece.count] + 1)
                }
                if cost[i] == Int.max { cost[i] = cost[i + 1] + 1 }
            }
            return cost
        }

        mutating func literal(_ bytes: [UInt8]) -> (Item, Int) {
            let c = costs(bytes)
            return (.literal(bytes, costs: c), c[0])
        }

        mutating func add(_ node: Node, _ length: Int) -> Int {
            nodes.append(node)
            minimumLength.append(length)
            return nodes.count - 1
        }

        mutating func compile(_ node: SchemaNode) throws -> Int {
            switch node {
            case let .object(_, _, properties):
                return try sequence(Self.steps(properties)[...])
            case let .array(element, lo, hi):
                let e = try compile(element)
                let minimum = max(0, lo ?? 0), maximum = hi ?? Int.max
                guard maximum >= minimum else {
                    throw GenerationSchema.SchemaError.unsupportedShape("an array with minimum count \(minimum) above maximum \(maximum)")
                }
                let elements = counted(element: e, from: 1, counts: [minimum ... maximum], after: [0], targets: [:])
                let (open, cost) = literal([UInt8(ascii: "[")])
                return add(.sequence([open, .value(elements)]), cost + minimumLength[elements])
            case let .string(choices?, _):
                guard !choices.isEmpty else { throw GenerationSchema.SchemaError.emptyTypeChoices(schema: "string") }
                let choiceTrie = trie(choices.map { c in
                    var q = ""
                    GeneratedContent.quote(c, into: &q)
                    return Array(q.utf8)
                })
                return add(.choice(choiceTrie), choiceTrie.distance[0])
            case let .string(nil, pattern?):
                let automaton = try PatternAutomaton(pattern)
                return add(.pattern(automaton), 2 + automaton.distance[automaton.start])
            case .string(nil, nil):
                return add(.string, 2)
            case let .number(lo, hi, integral):
                let (rule, length) = try numberRule(lo, hi, integral)
                return add(.numbers([rule], after: [0], targets: [:]), length)
            case .boolean:
                let booleans = trie([Array("true".utf8), Array("false".utf8)])
                return add(.choice(booleans), booleans.distance[0])
            case let .anyOf(name, _, choices):
                // Choices that are all strings merge into one set of strings.
                let strings = choices.compactMap { if case let .string(options?, nil) = $0 { options } else { nil } }
                if strings.count == choices.count { return try compile(.string(choices: strings.flatMap { $0 }, pattern: nil)) }
                return try compileChoice(name, choices)
            case let .reference(name):
                throw GenerationSchema.SchemaError.undefinedReferences(schema: nil, references: [name])
            }
        }

        /// The rest of an array of the compiled `element`, from just after its `[` (`from` 1) or just
        /// after an element (2), whose count of elements still to come ends in one of `counts`, each
        /// followed by `after[i]` tokens at least (see ``Node/counted(element:from:counts:after:targets:)``).
        mutating func counted(element: Int, from: Int, counts: [ClosedRange<Int>], after: [Int], targets: [Int: Int]) -> Int {
            let length = counts.indices.map {
                GrammarState.arrayRemaining(counts[$0], element: minimumLength[element], count: 0, stage: from)! + after[$0]
            }.min()!
            return add(.counted(element: element, from: from, counts: counts, after: after, targets: targets), length)
        }

        func trie(_ strings: [[UInt8]]) -> ChoiceTrie { ChoiceTrie(strings, vocabulary: vocabulary) }

        /// The rule of a number range, and the bytes of its shortest value.
        func numberRule(_ lo: Double?, _ hi: Double?, _ integral: Bool) throws -> (NumberRule, Int) {
            let rule = try NumberRule(minimum: lo, maximum: hi, integral: integral)
            guard let length = rule.remaining(NumberRule.State()) else {
                throw GenerationSchema.SchemaError.unsupportedShape("a number range with no value (\(lo ?? -.infinity)...\(hi ?? .infinity))")
            }
            return (rule, length)
        }
    }
}

/// Fixed byte strings as a trie; every string ends at a leaf (no choice is a prefix of another,
/// which closing quotes guarantee for strings).
struct ChoiceTrie: Sendable {
    /// Children per node as (byte, node) pairs.
    let children: [[(UInt8, Int)]]
    /// The fewest tokens from each node to an end.
    let distance: [Int]

    /// A trie of `strings`; `leafCosts` adds what follows a string (in tokens) to its end's distance.
    init(_ strings: [[UInt8]], vocabulary: TokenVocabulary, leafCosts: [[UInt8]: Int] = [:]) {
        var children: [[(UInt8, Int)]] = [[]]
        var ends: [Int: Int] = [:]
        for s in Set(strings).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            var node = 0
            for byte in s {
                if let child = children[node].first(where: { $0.0 == byte })?.1 {
                    node = child
                } else {
                    children.append([])
                    children[node].append((byte, children.count - 1))
                    node = children.count - 1
                }
            }
            ends[node] = leafCosts[s] ?? 0
        }
        self.children = children
        // Children are numbered after their parents, so one pass from the last node fills every
        // distance from its descendants': a token that walks the trie from n to m costs 1 + distance[m].
        var distance = [Int](repeating: Int.max, count: children.count)
        for n in stride(from: children.count - 1, through: 0, by: -1) {
            if children[n].isEmpty { distance[n] = ends[n] ?? 0; continue }
            for (byte, _) in children[n] {
                for t in vocabulary.byFirstByte[Int(byte)] {
                    var m = n
                    var ok = true
                    for c in vocabulary.bytes[Int(t)] {
                        guard let next = children[m].first(where: { $0.0 == c })?.1 else { ok = false; break }
                        m = next
                    }
                    if ok, distance[m] != Int.max { distance[n] = min(distance[n], distance[m] + 1) }
                }
            }
        }
        self.distance = distance
    }

    @inline(__always) func child(_ node: Int, _ byte: UInt8) -> Int? {
        for (b, c) in children[node] where b == byte { return c }
        return nil
    }

    func isLeaf(_ node: Int) -> Bool { children[node].isEmpty }

    /// The node where `string` ends.
    func leaf(_ string: [UInt8]) -> Int {
        var node = 0
        for byte in string { node = child(node, byte) ?? node }
        return node
    }
}
