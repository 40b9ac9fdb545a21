extension SchemaGrammar.Builder {
    /// One step of a value's compact JSON: fixed bytes (`{"name":`, `,"age":`, `}`), or a value
    /// (of the property those bytes named; a choice's shape at the top, where `property` is empty).
    enum Step: Equatable {
        case literal([UInt8])
        case value(SchemaNode, optional: Bool, property: String)
        /// The rest of an array of `element`s from just after its `[` (`first`) or just after an
        /// element: `minimum...maximum` more elements, then `]`.
        case elements(SchemaNode, first: Bool, minimum: Int, maximum: Int)
    }

    /// A choice parts and goes on together more often than this (structures of 32 numbers each
    /// under overlapping ranges, say) before it is refused. Compiling recurses once per level: 32 levels
    /// took between 256 and 384 KiB of stack in a debug build (less optimised), within the 512 KiB
    /// of a Dispatch or Swift concurrency thread on Apple's platforms (tested on such a thread).
    static let unionDepthLimit = 32

    /// A choice explores more alternatives than this before it is refused.
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
            case let .elements(node, first, minimum, maximum):
                let rest = counted(element: try compile(node), from: first ? 1 : 2, counts: [minimum ... maximum], after: [0], targets: [:])
                items.append(.value(rest))
                length += minimumLength[rest]
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

    /// A choice between shapes (a generable enum with payloads, a dynamic `anyOf`) that are not
    /// all strings (those merge into one set of strings: see ``compile(_:)``).
    ///
    /// The choices are decoded together for as long as their compact JSON agrees: properties
    /// that structures share (same name, same shape, in the same place) are one part of the
    /// grammar, and where they part, the next byte decides. Structures that part at a property
    /// name or where one ends are told apart by that name or the `}`; at a property's value, a
    /// value with a fixed few spellings (string choices, booleans, `null` for an optional one)
    /// is spelled out into the bytes after it, a structure is followed property by property in
    /// the same way, an array is followed bracket, element and comma in the same way (so arrays
    /// of different elements part at their first element; arrays of the same elements in
    /// different counts are read as one, and the count at `]` picks what follows), strings
    /// of several shapes (free text, a pattern, fixed choices) are read
    /// together up to the closing quote (``TextUnion``), numbers under several rules likewise up
    /// to their end (the rules the number meets pick what follows), and any other value is told
    /// apart by its first byte (a number's digit or sign, a string's quote).
    /// So tagged unions work (`{"type":"circle",...}` against `{"type":"square",...}`), as do
    /// choices between a number and text, a structure and an array, a fixed unit and free text,
    /// a score out of 10 and one out of 100, or a list of numbers and one of words. Refused with
    /// a typed error: arrays of different elements that read alike for a whole element (the same
    /// number under two ranges: following both would need a grammar that loops), more than
    /// ``numberRuleLimit`` number ranges or ``countRangeLimit`` array counts at one place, choices
    /// that take more than ``unionLimit`` alternatives to tell apart, and choices that part and go on
    /// together more than ``unionDepthLimit`` times.
    mutating func compileChoice(_ name: String, _ choices: [SchemaNode]) throws -> Int {
        var budget = Self.unionLimit
        return try union(choices.map { [.value($0, optional: false, property: "")][...] }, choice: name, budget: &budget)
    }

    /// The node that decodes any one of `branches` (each non-empty, and each starting at the
    /// same point of the JSON as the others).
    private mutating func union(_ branches: [ArraySlice<Step>], choice name: String, budget: inout Int) throws -> Int {
        if branches.dropFirst().allSatisfy({ $0.elementsEqual(branches[0]) }) { return try sequence(branches[0]) }
        // The same steps at the start of every branch (bytes, values): one part of the grammar,
        // then where they part, in one level however many they are.
        let shortest = branches.map(\.count).min()!
        var shared = 0
        while shared < shortest, branches.allSatisfy({ $0.dropFirst(shared).first! == branches[0].dropFirst(shared).first! }) { shared += 1 }
        guard shared < shortest else { throw Self.misaligned(name) }   // a branch would end where another goes on
        let parting = branches.map { $0.dropFirst(shared) }
        try Self.spend(parting.count, from: &budget, choice: name)   // copies of a branch stay one until they end
        // The same branches again inside their own union: arrays whose different elements read
        // alike for a whole element, which no grammar here follows (it would loop).
        guard !unionsUnderway.contains(parting) else {
            throw GenerationSchema.SchemaError.unsupportedShape(
                "a choice (\(name)) between arrays whose different elements read alike (no byte tells them apart)")
        }
        guard unionsUnderway.count < Self.unionDepthLimit else {
            throw GenerationSchema.SchemaError.unsupportedShape(
                "a choice (\(name)) whose shapes part more than \(Self.unionDepthLimit) times before one is left")
        }
        unionsUnderway.append(parting)
        defer { unionsUnderway.removeLast() }
        let node = try part(parting, choice: name, budget: &budget)
        return shared == 0 ? node : try sequence(branches[0].prefix(shared), then: node)
    }

    /// The node that decodes any one of `branches`, which differ in their first steps.
    private mutating func part(_ branches: [ArraySlice<Step>], choice name: String, budget: inout Int) throws -> Int {
        if case let .elements(element, first, _, _) = branches[0].first!,
           branches.allSatisfy({ if case .elements(element, first, _, _) = $0.first! { true } else { false } }) {
            return try counted(branches, element: element, first: first, choice: name, budget: &budget)
        }
        // Values that differ become bytes where they can (spelled out, or a structure's own
        // steps); the others are grouped by value, each group told apart by its first byte.
        var literals: [ArraySlice<Step>] = [], values: [Alternative] = [], texts: [Alternative] = []
        var property = ""
        for b in branches {
            switch b.first! {
            case .literal:
                literals.append(b)
            case let .value(node, optional, p):
                property = p
                if optional { literals.append(Self.joined([.literal(Array("null".utf8))], b.dropFirst())) }
                Self.expand(node, rest: b.dropFirst(), literals: &literals, texts: &texts, values: &values)
            case let .elements(node, first, minimum, maximum):
                // `]` where no more elements are needed; where more may come, an element (the first
                // one) or a comma and an element, then the rest of the array with one fewer to come.
                if minimum == 0 { literals.append(Self.joined([.literal([UInt8(ascii: "]")])], b.dropFirst())) }
                guard maximum > 0 else { continue }
                let next = Step.elements(node, first: false, minimum: max(0, minimum - 1),
                                         maximum: maximum == Int.max ? maximum : maximum - 1)
                if first {
                    Self.expand(node, rest: [next] + b.dropFirst(), literals: &literals, texts: &texts, values: &values)
                } else {
                    literals.append([.literal([UInt8(ascii: ",")]), .value(node, optional: false, property: property), next] + b.dropFirst())
                }
            }
        }
        var parts: [(first: ByteSet, node: Int)] = []
        if texts.contains(where: { !Self.isFixed($0.node) }), texts.count > 1 {
            // Strings of several shapes, one of them not fixed: read together to the closing quote.
            try Self.spend(texts.count, from: &budget, choice: name)
            parts.append((ByteSet([UInt8(ascii: "\"")]), try text(texts, choice: name, budget: &budget)))
        } else {
            // Fixed strings are spelled out like any other bytes; a lone other string is a value.
            for t in texts {
                guard case let .string(choices?, _) = t.node else {
                    values.append(t)
                    continue
                }
                for c in choices {
                    var quoted = ""
                    GeneratedContent.quote(c, into: &quoted)
                    for rest in t.rests { literals.append(Self.joined([.literal(Array(quoted.utf8))], rest)) }
                }
            }
        }
        let isNumber = { (a: Alternative) in if case .number = a.node { true } else { false } }
        if values.filter(isNumber).count > 1 {
            // Numbers under different rules: read together, the rules the number meets picking what follows.
            parts.append((Self.numberFirstBytes, try numbers(values.filter(isNumber), choice: name, budget: &budget)))
            values.removeAll(where: isNumber)
        }
        try Self.spend(literals.count + values.count, from: &budget, choice: name)
        if !literals.isEmpty {
            var first = ByteSet()
            for b in literals { if case let .literal(bytes) = b.first! { first.insert(bytes[0]) } }
            parts.append((first, try dispatch(literals, choice: name, budget: &budget)))
        }
        for (node, rests) in values {
            let value = try compile(node)
            var target = value
            if !rests.allSatisfy(\.isEmpty) {
                guard rests.allSatisfy({ !$0.isEmpty }) else { throw Self.misaligned(name) }
                let tail = try union(rests, choice: name, budget: &budget)
                target = add(.sequence([.value(value), .value(tail)]), minimumLength[value] + minimumLength[tail])
            }
            parts.append((firstBytes(value), target))
        }
        for (i, a) in parts.enumerated() where parts[(i + 1)...].contains(where: { $0.first.intersects(a.first) }) {
            throw GenerationSchema.SchemaError.unsupportedShape(property.isEmpty
                ? "a choice (\(name)) between shapes that begin alike"
                : "a choice (\(name)) between structures that agree up to property '\(property)' and then differ in its shape "
                    + "where the next byte does not tell them apart")
        }
        if parts.count == 1 { return parts[0].node }
        return add(.peek(parts), parts.map { minimumLength[$0.node] }.min()!)
    }

    /// Branches that each start with bytes: grouped by them; one group shares them, several are
    /// told apart by them (a dispatch whose leaves go on with each group's union).
    private mutating func dispatch(_ branches: [ArraySlice<Step>], choice name: String, budget: inout Int) throws -> Int {
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
            if rests.allSatisfy(\.isEmpty) { continue }   // the value ends with these bytes
            guard rests.allSatisfy({ !$0.isEmpty }) else { throw Self.misaligned(name) }
            let target = try union(rests, choice: name, budget: &budget)
            targets[bytes] = target
            costs[bytes] = minimumLength[target]
        }
        let trie = ChoiceTrie(order, vocabulary: vocabulary, leafCosts: costs)
        var byLeaf: [Int: Int] = [:]
        for (bytes, target) in targets { byLeaf[trie.leaf(bytes)] = target }
        return add(.dispatch(trie, targets: byLeaf), trie.distance[0])
    }

    /// A value's shape and the steps of each branch that go on after it.
    typealias Alternative = (node: SchemaNode, rests: [ArraySlice<Step>])

    /// Adds a value of `node` followed by `rest` to `literals` as bytes where it can be (each
    /// spelling of a boolean; a structure's steps), to `texts` when it is a string (of fixed
    /// choices, a pattern or free), or else to `values`, grouped with the branches that have the
    /// same value there. A choice is each of its shapes.
    private static func expand(_ node: SchemaNode, rest: ArraySlice<Step>, literals: inout [ArraySlice<Step>],
                               texts: inout [Alternative], values: inout [Alternative]) {
        switch node {
        case .string(let choices, _) where choices.map({ !$0.isEmpty }) ?? true:   // (no choices: compiling it names the error)
            add(node, rest, to: &texts)
        case .boolean:
            for spelling in ["true", "false"] { literals.append(joined([.literal(Array(spelling.utf8))], rest)) }
        case let .object(_, _, properties):
            literals.append(joined(steps(properties)[...], rest))
        case let .array(element, lo, hi) where (hi ?? Int.max) >= max(0, lo ?? 0):   // (else compiling it names the error)
            literals.append([.literal([UInt8(ascii: "[")]), .elements(element, first: true, minimum: max(0, lo ?? 0),
                                                                       maximum: hi ?? Int.max)] + rest)
        case let .anyOf(_, _, choices) where !choices.isEmpty:
            for c in choices { expand(c, rest: rest, literals: &literals, texts: &texts, values: &values) }
        default:
            add(node, rest, to: &values)
        }
    }

    private static func add(_ node: SchemaNode, _ rest: ArraySlice<Step>, to alternatives: inout [Alternative]) {
        if let i = alternatives.firstIndex(where: { $0.node == node }) {
            alternatives[i].rests.append(rest)
        } else {
            alternatives.append((node, [rest]))
        }
    }

    /// The most number ranges a choice reads together (every set of them that a number may meet
    /// at once gets the union of their branches' rests).
    static let numberRuleLimit = 6

    static let numberFirstBytes = ByteSet(Array("-0123456789".utf8))

    /// A node reading a number under the rules of `numbers` (each a number range) together; each
    /// set of rules a number may end up meeting is followed by the union of their rests.
    private mutating func numbers(_ numbers: [Alternative], choice name: String, budget: inout Int) throws -> Int {
        guard numbers.count <= Self.numberRuleLimit else {
            throw GenerationSchema.SchemaError.unsupportedShape(
                "a choice (\(name)) between more than \(Self.numberRuleLimit) number ranges at one place")
        }
        let rules = try numbers.map { n -> (rule: NumberRule, length: Int) in
            guard case let .number(lo, hi, integral) = n.node else { throw Self.misaligned(name) }
            return try numberRule(lo, hi, integral)
        }
        try Self.spend((1 << rules.count) - 1, from: &budget, choice: name)
        var targets: [Int: Int] = [:], after = [Int](repeating: 0, count: rules.count)
        for mask in 1 ..< 1 << rules.count {
            let members = rules.indices.filter { mask & 1 << $0 != 0 }
            let rests = members.flatMap { numbers[$0].rests }
            if rests.allSatisfy(\.isEmpty) { continue }   // the value ends with the number
            guard rests.allSatisfy({ !$0.isEmpty }) else { throw Self.misaligned(name) }
            let target = try union(rests, choice: name, budget: &budget)
            targets[mask] = target
            // What follows a number of rule r: at most the longest shortest rest of any set with r.
            for r in members { after[r] = max(after[r], minimumLength[target]) }
        }
        let length = rules.indices.map { rules[$0].length + after[$0] }.min()!
        return add(.numbers(rules.map(\.rule), after: after, targets: targets), length)
    }

    /// The most ranges of counts a choice reads one array under (a bit per range in the masks).
    static let countRangeLimit = 16

    /// A node reading the rest of an array whose elements every branch shares but whose counts
    /// differ (each branch's first step `.elements(element, first, ...)`), then, at `]`, the
    /// union of the rests of the branches whose count range the count is in.
    private mutating func counted(_ branches: [ArraySlice<Step>], element node: SchemaNode, first: Bool, choice name: String,
                                  budget: inout Int) throws -> Int {
        var counts: [ClosedRange<Int>] = [], rests: [[ArraySlice<Step>]] = []
        for b in branches {
            guard case let .elements(_, _, minimum, maximum) = b.first! else { throw Self.misaligned(name) }
            if let i = counts.firstIndex(of: minimum ... maximum) { rests[i].append(b.dropFirst()) } else {
                counts.append(minimum ... maximum)
                rests.append([b.dropFirst()])
            }
        }
        guard counts.count <= Self.countRangeLimit else {
            throw GenerationSchema.SchemaError.unsupportedShape(
                "a choice (\(name)) between arrays of more than \(Self.countRangeLimit) counts at one place")
        }
        // The count's mask changes only where a range starts or ends: one mask per stretch between.
        let edges = Set(counts.flatMap { [$0.lowerBound, $0.upperBound == Int.max ? Int.max : $0.upperBound + 1] } + [0])
        let masks = Set(edges.map { count in counts.indices.reduce(0) { $0 | (counts[$1].contains(count) ? 1 << $1 : 0) } }).subtracting([0])
        try Self.spend(masks.count, from: &budget, choice: name)
        var targets: [Int: Int] = [:], after = [Int](repeating: 0, count: counts.count)
        for mask in masks.sorted() {
            let members = counts.indices.filter { mask & 1 << $0 != 0 }
            let following = members.flatMap { rests[$0] }
            if following.allSatisfy(\.isEmpty) { continue }   // the value ends with the array
            guard following.allSatisfy({ !$0.isEmpty }) else { throw Self.misaligned(name) }
            let target = try union(following, choice: name, budget: &budget)
            targets[mask] = target
            for i in members { after[i] = max(after[i], minimumLength[target]) }
        }
        return counted(element: try compile(node), from: first ? 1 : 2, counts: counts, after: after, targets: targets)
    }

    /// Whether `node` is a string of fixed choices.
    private static func isFixed(_ node: SchemaNode) -> Bool {
        if case .string(_?, _) = node { true } else { false }
    }

    /// A ``TextUnion`` of the strings in `texts`, each ending followed by the union of the rests
    /// of the shapes that end there.
    private mutating func text(_ texts: [Alternative], choice name: String, budget: inout Int) throws -> Int {
        let shapes = try texts.map { t -> TextUnion.Shape in
            switch t.node {
            case let .string(choices?, _): return TextUnion.Shape(choices: choices)
            case let .string(nil, pattern?): return TextUnion.Shape(try PatternAutomaton(pattern))
            default: return TextUnion.Shape.freeText
            }
        }
        var union = try TextUnion(shapes, choice: name)
        try Self.spend(union.endings.count, from: &budget, choice: name)
        var targets: [Int: Int] = [:], after: [Int] = []
        for (e, shapes) in union.endings.enumerated() {
            let rests = shapes.flatMap { texts[$0].rests }
            if rests.allSatisfy(\.isEmpty) {   // the value ends with the string
                after.append(0)
                continue
            }
            guard rests.allSatisfy({ !$0.isEmpty }) else { throw Self.misaligned(name) }
            let target = try self.union(rests, choice: name, budget: &budget)
            targets[e] = target
            after.append(minimumLength[target])
        }
        union.measure(after: after)
        return add(.text(union, targets: targets), 1 + union.distance[0])
    }

    /// `steps` then `rest`, the literal that ends the one and the literal that starts the other
    /// joined into one step.
    private static func joined(_ steps: ArraySlice<Step>, _ rest: ArraySlice<Step>) -> ArraySlice<Step> {
        guard case let .literal(a)? = steps.last, case let .literal(b)? = rest.first else { return steps + rest }
        return steps.dropLast() + [.literal(a + b)] + rest.dropFirst()
    }

    /// The bytes a value of the compiled `node` may start with.
    func firstBytes(_ node: Int) -> ByteSet {
        switch nodes[node] {
        case let .sequence(items):
            switch items[0] {
            case let .literal(bytes, _): return ByteSet([bytes[0]])
            case let .value(v): return firstBytes(v)
            }
        case .string, .pattern: return ByteSet([UInt8(ascii: "\"")])
        case let .choice(trie), let .dispatch(trie, _): return ByteSet(trie.children[0].map(\.0))
        case .numbers: return Self.numberFirstBytes
        case let .counted(element, from, counts, _, _):
            var bytes = counts.contains { $0.lowerBound == 0 } ? ByteSet([UInt8(ascii: "]")]) : ByteSet()
            if counts.contains(where: { $0.upperBound > 0 }) {
                bytes = bytes.union(from == 1 ? firstBytes(element) : ByteSet([UInt8(ascii: ",")]))
            }
            return bytes
        case let .nullable(inner, null): return firstBytes(inner).union(firstBytes(null))
        case let .peek(parts): return parts.reduce(ByteSet()) { $0.union($1.first) }
        case .text: return ByteSet([UInt8(ascii: "\"")])
        }
    }

    /// Takes `count` alternatives from what a choice may explore, or throws once it is spent.
    private static func spend(_ count: Int, from budget: inout Int, choice name: String) throws {
        budget -= count
        guard budget >= 0 else {
            throw GenerationSchema.SchemaError.unsupportedShape(
                "a choice (\(name)) that takes more than \(unionLimit) alternatives to tell apart")
        }
    }

    /// Steps that do not line up as JSON's do (never expected).
    private static func misaligned(_ name: String) -> GenerationSchema.SchemaError {
        .unsupportedShape("a choice (\(name)) whose shapes could not be aligned")
    }
}
