/// Where decoding stands in a ``SchemaGrammar``: a stack of frames, the innermost on top.
///
/// Fed one byte at a time, it either accepts the byte or refuses it (and must then be
/// discarded: callers feed a copy). ``remaining`` bounds the tokens that finish a valid
/// value from here: the sum over the open parts of the fewest tokens each needs (literals
/// and choices spelled with the vocabulary's longest fitting pieces, other bytes one token
/// each). Some single token always lowers it by at least one (the first token of the
/// cheapest spelling of what comes next), which is what makes decoding budget-aware
/// (see ``TokenMasker``).
struct GrammarState {
    /// One open value. The fields' meaning depends on the node:
    /// sequence: `a` item index, `b` position in a literal; counted (an array's elements): `a`
    /// elements read, `b` stage (0: the node's `from`, 1 after `[`, 2 after an element, 3 after `,`);
    /// string: `a` stage (0 before the opening quote, 1 in the text, 2 after a backslash, 3-6
    /// before the first to fourth hex digit of a `\u` escape), `b` UTF-8 continuation bytes
    /// pending in its low two bits, and above them the lead's ``WellFormedUTF8`` row plus one
    /// until the first continuation (stage 1), or whether the escape's first hex digit was `d` (stage 4);
    /// pattern: `a` stage, `b` automaton state; choice: `a` trie node; numbers: `number`, and `a`
    /// a bit per rule the number has broken;
    /// text: `a` stage (0 before the opening quote, 1 in the text), `b` automaton state.
    struct Frame: Hashable {
        var node: Int
        var a = 0
        var b = 0
        var number = NumberRule.State()
        /// Bytes the frames below need once this one is complete.
        var below = 0
    }

    let grammar: SchemaGrammar
    private(set) var top: Frame?
    private(set) var stack: [Frame] = []
    /// A state holding one frame alone: popping it (a number included) finishes the state.
    private var isolated = false

    init(_ grammar: SchemaGrammar) {
        self.grammar = grammar
        top = Frame(node: grammar.root)
    }

    /// A state holding only `frame` (to classify tokens by what they do to it alone).
    init(_ grammar: SchemaGrammar, isolating frame: Frame) {
        self.grammar = grammar
        var f = frame
        f.below = 0
        top = f
        isolated = true
    }

    /// Whether the value is complete and nothing more can follow.
    var isFinished: Bool { top == nil }

    /// Whether generation may stop here: finished, or a number that is complete and ends the
    /// value. A number frame with nothing below it need not end the value: where a union's
    /// branches were read together, what follows the number (`targets`) depends on which rules
    /// it satisfies, and stopping is allowed only where that is nothing.
    var canStop: Bool {
        guard let top else { return true }
        guard stack.isEmpty else { return false }
        switch grammar.nodes[top.node] {
        case let .numbers(rules, _, targets):
            let satisfied = Self.satisfied(rules, top)
            return satisfied != 0 && targets[satisfied] == nil
        default: return false
        }
    }

    /// How deep the stack is (0 when finished).
    var depth: Int { top == nil ? 0 : stack.count + 1 }

    /// The fewest bytes that complete a valid value from here.
    var remaining: Int {
        guard let top else { return 0 }
        return top.below + Self.remaining(in: top, grammar)
    }

    static func remaining(in f: Frame, _ g: SchemaGrammar) -> Int {
        switch g.nodes[f.node] {
        case let .sequence(items):
            var n = 0
            for (i, item) in items.enumerated() where i >= f.a {
                switch item {
                case let .literal(_, costs): n += costs[i == f.a ? f.b : 0]
                case let .value(v): n += g.minimumLength[v]
                }
            }
            return n
        case let .counted(element, from, counts, after, _):
            var n = Int.max / 4
            for (i, range) in counts.enumerated() {
                if let left = arrayRemaining(range, element: g.minimumLength[element], count: f.a, stage: f.b == 0 ? from : f.b) {
                    n = min(n, left + after[i])
                }
            }
            return n
        case .string:
            switch f.a {
            case 0: return 2
            case 1: return (f.b & 3) + 1
            case 2: return 2   // the escaped character, then the quote
            default: return 7 - f.a + 1   // the hex digits left, then the quote
            }
        case let .pattern(p): return f.a == 0 ? 2 + p.distance[p.start] : p.distance[f.b] + 1
        case let .choice(trie): return trie.distance[f.a]
        case let .nullable(inner, null): return min(g.minimumLength[null], g.minimumLength[inner])
        case let .dispatch(trie, _): return trie.distance[f.a]
        case .peek: return g.minimumLength[f.node]
        case let .text(union, _): return f.a == 0 ? g.minimumLength[f.node] : union.distance[f.b]
        case let .numbers(rules, after, _):
            var n = Int.max / 4
            for r in rules.indices where f.a & 1 << r == 0 {
                if let left = rules[r].remaining(f.number) { n = min(n, left + after[r]) }
            }
            return n
        }
    }

    /// The fewest bytes that close an array whose count must end in `range`, from `stage` (as a
    /// counted frame's `b`: 1 after `[`, 2 after an element, 3 after `,`) with `count` elements
    /// read, each element at least `e` bytes; nil where the range is out of reach.
    static func arrayRemaining(_ range: ClosedRange<Int>, element e: Int, count: Int, stage: Int) -> Int? {
        let pending = stage == 3 ? 1 : 0   // an element must follow a comma
        guard range.upperBound >= count + pending else { return nil }
        let more = max(0, range.lowerBound - count - pending)   // elements needed beyond that one
        switch stage {
        case 1: return more == 0 ? 1 : more * e + more - 1 + 1
        case 2: return more * (e + 1) + 1
        default: return e + more * (e + 1) + 1
        }
    }

    /// The rules of a `numbers` frame (`a`: a bit per rule the number has broken) that its number
    /// satisfies as it stands, as a bit mask.
    static func satisfied(_ rules: [NumberRule], _ f: Frame) -> Int {
        var mask = 0
        for r in rules.indices where f.a & 1 << r == 0 && rules[r].isComplete(f.number) { mask |= 1 << r }
        return mask
    }

    private mutating func push(_ node: Int) {
        let parent = top!
        stack.append(parent)
        top = Frame(node: node, below: parent.below + Self.remaining(in: parent, grammar))
    }

    private mutating func pop() { top = stack.popLast() }

    /// Feeds one byte; returns false when the grammar refuses it (the state is then invalid).
    mutating func feed(_ c: UInt8) -> Bool {
        while true {
            guard var f = top else { return false }
            switch grammar.nodes[f.node] {
            case let .sequence(items):
                switch items[f.a] {
                case let .literal(bytes, _):
                    guard bytes[f.b] == c else { return false }
                    f.b += 1
                    if f.b == bytes.count { f.a += 1; f.b = 0 }
                    top = f
                    if f.a == items.count { pop() }
                    return true
                case let .value(v):
                    f.a += 1
                    if f.a == items.count {
                        top = Frame(node: v, below: f.below)   // the last item: what follows the sequence
                    } else {
                        top = f
                        push(v)
                    }
                }
            case let .counted(element, from, counts, _, targets):
                let stage = f.b == 0 ? from : f.b, most = counts.map(\.upperBound).max()!
                if c == UInt8(ascii: "]"), stage == 1 || stage == 2 {
                    var mask = 0
                    for (i, range) in counts.enumerated() where range.contains(f.a) { mask |= 1 << i }
                    guard mask != 0 else { return false }
                    if let target = targets[mask] { top = Frame(node: target, below: f.below) } else { pop() }
                    return true
                }
                if stage == 2 {
                    guard c == UInt8(ascii: ","), f.a < most else { return false }
                    f.b = 3
                    top = f
                    return true
                }
                guard f.a < most else { return false }
                f.a += 1
                f.b = 2
                top = f
                push(element)
            case .string:
                guard Self.feedString(&f, c) else { return false }
                if f.a == Self.closedString {
                    pop()
                    return true
                }
                top = f
                return true
            case let .pattern(p):
                if f.a == 0 {
                    guard c == UInt8(ascii: "\"") else { return false }
                    f.a = 1
                    f.b = p.start
                } else {
                    // A quote closes the string, except after a backslash (only the states
                    // there have a transition on it: the automaton runs over escaped text).
                    let n = p.step(f.b, c)
                    if n < 0, c == UInt8(ascii: "\"") {
                        guard p.accepting[f.b] else { return false }
                        pop()
                        return true
                    }
                    guard n >= 0, p.distance[n] != Int.max else { return false }
                    f.b = n
                }
                top = f
                return true
            case let .choice(trie):
                guard let child = trie.child(f.a, c) else { return false }
                f.a = child
                top = f
                if trie.isLeaf(child) { pop() }
                return true
            case let .numbers(rules, _, targets):
                var next: NumberRule.State?, broken = f.a
                for r in rules.indices where f.a & 1 << r == 0 {
                    if let n = rules[r].step(f.number, c) { next = n } else { broken |= 1 << r }
                }
                if let next {   // the byte is part of the number for some rule (the same state for every one)
                    f.number = next
                    f.a = broken
                    top = f
                    return true
                }
                // Not part of the number: it ends here if some rule takes it, and the byte goes on.
                let satisfied = Self.satisfied(rules, f)
                guard satisfied != 0 else { return false }
                if let target = targets[satisfied] {
                    top = Frame(node: target, below: f.below)
                    continue
                }
                guard !stack.isEmpty || isolated else { return false }
                if stack.isEmpty {
                    top = nil
                    return false
                }
                pop()
            case let .nullable(inner, null):
                top = Frame(node: c == UInt8(ascii: "n") ? null : inner, below: f.below)
            case let .peek(parts):
                guard let part = parts.first(where: { $0.first.contains(c) }) else { return false }
                top = Frame(node: part.node, below: f.below)   // the byte goes to the part it picked
            case let .text(union, targets):
                if f.a == 0 {
                    guard c == UInt8(ascii: "\"") else { return false }
                    f.a = 1
                    top = f
                    return true
                }
                let n = union.step(f.b, c)
                if n < 0 {   // an unescaped quote closes the text where some shapes end
                    guard c == UInt8(ascii: "\""), union.ending[f.b] >= 0 else { return false }
                    if let target = targets[Int(union.ending[f.b])] {
                        top = Frame(node: target, below: f.below)
                    } else {
                        pop()
                    }
                    return true
                }
                guard union.distance[n] != Int.max else { return false }
                f.b = n
                top = f
                return true
            case let .dispatch(trie, targets):
                guard let child = trie.child(f.a, c) else { return false }
                if let target = targets[child] {
                    top = Frame(node: target, below: f.below)   // the prefix is complete: its node follows
                } else if trie.isLeaf(child) {
                    pop()   // a prefix with nothing after it
                } else {
                    f.a = child
                    top = f
                }
                return true
            }
        }
    }

    /// The stage ``feedString(_:_:)`` leaves a string frame in once its closing quote is fed.
    private static let closedString = -1

    /// One byte of a JSON string: text (whole UTF-8 sequences, no control character, quote or
    /// backslash), or an escape (`\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t`, or `\u` and four hex
    /// digits naming a character that is not half of a surrogate pair: a lone half would decode
    /// as U+FFFD; characters beyond the first plane are written as UTF-8 instead).
    private static func feedString(_ f: inout Frame, _ c: UInt8) -> Bool {
        switch f.a {
        case 0:
            guard c == UInt8(ascii: "\"") else { return false }
            f.a = 1
        case 1 where f.b > 0:
            // `b`: continuation bytes pending, and above them the lead's row of `WellFormedUTF8`
            // (plus one) while the first continuation, whose range the lead narrows, is still to come.
            let range = f.b >> 2 == 0 ? WellFormedUTF8.continuation : WellFormedUTF8.sequences[(f.b >> 2) - 1].second
            guard range.contains(c) else { return false }
            f.b = (f.b & 3) - 1
        case 1:
            switch c {
            case UInt8(ascii: "\""): f.a = closedString
            case UInt8(ascii: "\\"): f.a = 2
            case _ where !ByteSet.stringContent.contains(c): return false
            case 0x00 ..< 0x80: break
            default:
                guard let row = WellFormedUTF8.row(leading: c) else { return false }
                f.b = ((row + 1) << 2) | (WellFormedUTF8.sequences[row].length - 1)
            }
        case 2:
            switch c {
            case UInt8(ascii: "u"): f.a = 3
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                 UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"): f.a = 1
            default: return false
            }
        default:
            guard let digit = c.hexDigitValue else { return false }
            if f.a == 3 { f.b = digit == 0xD ? 1 : 0 }
            if f.a == 4 {
                guard f.b == 0 || digit < 8 else { return false }   // d800-dfff: surrogate halves
                f.b = 0
            }
            f.a = f.a == 6 ? 1 : f.a + 1
        }
        return true
    }

    /// Feeds `bytes`; false when any is refused.
    mutating func feed(_ bytes: [UInt8]) -> Bool {
        for c in bytes where !feed(c) { return false }
        return true
    }
}
