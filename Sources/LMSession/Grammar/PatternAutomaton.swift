/// A regular expression compiled to a deterministic automaton over UTF-8 bytes, so the
/// decoder can tell after every byte whether a whole match is still reachable, and how many
/// bytes away the nearest one is.
///
/// Supported: literals (any UTF-8), `.`, classes `[a-z]`/`[^...]` (members and ranges of any
/// scalars, `[à-ÿ€]`, `[^é]`: beyond ASCII compiled through ``ScalarRanges``), escapes
/// `\d \w \s \D \W \S` and escaped punctuation, groups `(...)`/`(?:...)`, alternation `|`, quantifiers
/// `* + ? {n} {n,} {n,m} {,m}` (as Swift's `Regex` reads them: spaces inside the braces allowed; a
/// trailing `?` or `+` on a quantifier is accepted and ignored), and
/// `^`/`$` at the ends. Not supported (a typed error names it): backreferences, lookaround,
/// anchors inside the pattern, nested classes, counted repetition above 64, and patterns whose
/// automaton would be too large to build quickly (``maximumConstructionWork``).
///
/// A match may contain `"`, `\`, tab, line feed and carriage return (`\"`, `\\`, `\t`, `\n`,
/// `\r` in the pattern; the wildcards below take the first four, but `.` no line break), which the
/// JSON text holds as two-byte escapes: the automaton runs over the JSON bytes between the
/// quotes, each of those characters reached through a state after its backslash, so the
/// distances count the escapes' bytes. Other control characters never match. `\d \w \s` are
/// ASCII (`\w` is `[A-Za-z0-9_]`, where Swift's `Regex` also takes letters such as `é`; `\s` is
/// space, tab and line feed).
///
/// The wildcards (`.`, negated classes, `\D \W \S`) take, beyond ASCII, one scalar of
/// ``ScalarRanges/standalone`` (or its subsets for `\D` and `\W`): characters of their own,
/// which join no neighbour, and no carriage return unless the pattern names it. So a match
/// means the same under `Regex`'s default (grapheme-cluster) semantics as scalar by scalar,
/// `matchingSemantics(.unicodeScalar)`, unless the pattern's own literals or positive classes
/// name what joins (a combining mark), which match scalar by scalar.
struct PatternAutomaton: Sendable {
    /// Transitions: `next[state * 256 + byte]`, or -1.
    let next: [Int32]
    /// Whether each state is a whole match.
    let accepting: [Bool]
    /// Bytes to the nearest whole match from each state (`Int.max` when none is reachable).
    let distance: [Int]
    let start: Int
    /// The largest finite distance (how much budget a match may need from any live state).
    let maximumDistance: Int

    static let maximumStates = 4096
    static let maximumRepetition = 64
    /// NFA-state visits the subset construction may make (states × bytes × set sizes): a pattern
    /// whose automaton would take longer to build is refused rather than stalling the request.
    /// Fuzzing found `(ab|` + 127 dots + `c)+`: 4,096 states of ~130 NFA states each, 20 s.
    static let maximumConstructionWork = 2_000_000
    /// States the Thompson construction may make before the pattern is refused. Repetitions
    /// copy what they repeat, so nested ones multiply: 20 nested `+` would make a million copies
    /// of the innermost group, three nested `{64}` a quarter of a million, from a few bytes of pattern.
    static let maximumNFAStates = 8192

    init(_ pattern: String) throws {
        var parser = PatternParser(Array(pattern.utf8), pattern: pattern)
        let ast = try parser.parse()
        var nfa = NFA()
        let (s, e) = try nfa.build(ast, pattern: pattern)
        nfa.accept = e
        // Subset construction over the 256 bytes (content bytes only). Bytes that reach the same
        // NFA states (most of them, under classes and dots) share one closure per set.
        var closer = ClosureBuilder(nfa)
        var sets: [[Int]] = [closer.closure([s])]
        var index: [[Int]: Int] = [sets[0]: 0]
        var next: [Int32] = []
        var i = 0, work = 0
        while i < sets.count {
            var row = [Int32](repeating: -1, count: 256)
            work += 256 * sets[i].reduce(0) { $0 + max(1, nfa.edges[$1].count) }   // the loop below visits every edge
            guard work <= Self.maximumConstructionWork else {
                throw GenerationSchema.SchemaError.unsupportedPattern(pattern, reason: "its automaton is too large to build (over \(sets.count) states of up to \(sets[i].count) alternatives each)")
            }
            var reached: [[Int]: Int32] = [:]
            for b in 0 ... 255 where ByteSet.patternContent.contains(UInt8(b)) {
                var targets: [Int] = []
                for state in sets[i] {
                    for (set, to) in nfa.edges[state] where set.contains(UInt8(b)) { targets.append(to) }
                }
                guard !targets.isEmpty else { continue }
                if let known = reached[targets] {
                    row[b] = known
                    continue
                }
                let closed = closer.closure(targets)
                if let existing = index[closed] {
                    row[b] = Int32(existing)
                } else {
                    guard sets.count < Self.maximumStates else {
                        throw GenerationSchema.SchemaError.unsupportedPattern(pattern, reason: "more than \(Self.maximumStates) automaton states")
                    }
                    index[closed] = sets.count
                    row[b] = Int32(sets.count)
                    sets.append(closed)
                }
                reached[targets] = row[b]
            }
            next += row
            i += 1
        }
        var accepting = sets.map { $0.contains(e) }
        Self.escape(&next, &accepting)
        self.accepting = accepting
        let count = accepting.count
        // Distances by backward breadth-first search from the accepting states.
        var distance = accepting.map { $0 ? 0 : Int.max }
        var reverse = [[Int]](repeating: [], count: count)
        for from in 0 ..< count {
            for b in 0 ..< 256 where next[from * 256 + b] >= 0 { reverse[Int(next[from * 256 + b])].append(from) }
        }
        var queue = distance.indices.filter { distance[$0] == 0 }
        var head = 0
        while head < queue.count {
            let s = queue[head]
            head += 1
            for p in reverse[s] where distance[p] == Int.max {
                distance[p] = distance[s] + 1
                queue.append(p)
            }
        }
        guard distance[0] != Int.max else {
            throw GenerationSchema.SchemaError.unsupportedPattern(pattern, reason: "it matches no string a JSON string can hold (control characters other than tab and line breaks never match)")
        }
        self.next = next
        self.distance = distance
        self.start = 0
        maximumDistance = distance.filter { $0 != Int.max }.max() ?? 0
    }

    /// The characters a JSON string holds as a backslash and one byte, and that byte.
    static let escapes: [(raw: UInt8, code: UInt8)] = [(0x22, 0x22), (0x5C, 0x5C), (0x09, UInt8(ascii: "t")),
                                                       (0x0A, UInt8(ascii: "n")), (0x0D, UInt8(ascii: "r"))]

    /// Turns an automaton over the match's own bytes into one over its JSON text: each state
    /// with a transition on a character that JSON escapes gets a state after the backslash,
    /// which the escape's second byte leaves for that transition's target; the raw quote and
    /// control bytes go (the quote closes the string instead), and the raw backslash becomes
    /// the way into the new state.
    private static func escape(_ next: inout [Int32], _ accepting: inout [Bool]) {
        let count = accepting.count
        for state in 0 ..< count where escapes.contains(where: { next[state * 256 + Int($0.raw)] >= 0 }) {
            var row = [Int32](repeating: -1, count: 256)
            for (raw, code) in escapes {
                row[Int(code)] = next[state * 256 + Int(raw)]
                next[state * 256 + Int(raw)] = -1
            }
            next[state * 256 + 0x5C] = Int32(accepting.count)
            next += row
            accepting.append(false)
        }
    }

    @inline(__always) func step(_ state: Int, _ byte: UInt8) -> Int { Int(next[state &* 256 &+ Int(byte)]) }

    /// Whether `text` is a whole match (for tests and checks): its JSON-escaped bytes are run.
    func matches(_ text: String) -> Bool {
        var s = start
        for b in text.utf8 {
            if let escape = Self.escapes.first(where: { $0.raw == b }) {
                s = step(s, 0x5C)
                if s < 0 { return false }
                s = step(s, escape.code)
            } else {
                s = step(s, b)
            }
            if s < 0 { return false }
        }
        return accepting[s]
    }
}

/// The parsed form of a pattern.
indirect enum PatternNode {
    case bytes(ByteSet)
    /// The ASCII bytes of `ascii`, or one non-ASCII scalar in `others`.
    case asciiOr(ByteSet, [ClosedRange<UInt32>])
    /// One non-ASCII scalar whose value is in one of the ranges.
    case scalars([ClosedRange<UInt32>])
    case sequence([PatternNode])
    case alternation([PatternNode])
    case repeated(PatternNode, min: Int, max: Int?)
}

/// Thompson construction: states with byte-set and empty edges.
struct NFA {
    var edges: [[(ByteSet, Int)]] = []
    var empties: [[Int]] = []
    var accept = 0

    mutating func add() -> Int {
        edges.append([])
        empties.append([])
        return edges.count - 1
    }

    /// Refuses the pattern once its states pass ``PatternAutomaton/maximumNFAStates``.
    private func checkSize(_ pattern: String) throws {
        guard edges.count <= PatternAutomaton.maximumNFAStates else {
            throw GenerationSchema.SchemaError.unsupportedPattern(
                pattern, reason: "its automaton is too large to build (over \(PatternAutomaton.maximumNFAStates) NFA states)")
        }
    }

    mutating func build(_ node: PatternNode, pattern: String) throws -> (Int, Int) {
        try checkSize(pattern)
        switch node {
        case let .bytes(set):
            let s = add(), e = add()
            edges[s].append((set, e))
            return (s, e)
        case let .asciiOr(ascii, others):
            return try build(.alternation([.bytes(ascii.subtracting(ByteSet(range: 0x80 ... 0xFF))), .scalars(others)]), pattern: pattern)
        case let .scalars(ranges):
            let ends = scalars(ScalarRanges.utf8Sequences(ranges))
            try checkSize(pattern)   // a class of thousands of ranges
            return ends
        case let .sequence(parts):
            let s = add()
            var end = s
            for p in parts {
                let (ps, pe) = try build(p, pattern: pattern)
                empties[end].append(ps)
                end = pe
            }
            return (s, end)
        case let .alternation(options):
            let s = add(), e = add()
            for o in options {
                let (os, oe) = try build(o, pattern: pattern)
                empties[s].append(os)
                empties[oe].append(e)
            }
            return (s, e)
        case let .repeated(inner, min, max):
            guard min <= PatternAutomaton.maximumRepetition, (max ?? 0) <= PatternAutomaton.maximumRepetition else {
                throw GenerationSchema.SchemaError.unsupportedPattern(pattern, reason: "counted repetition above \(PatternAutomaton.maximumRepetition)")
            }
            let s = add()
            var end = s
            for _ in 0 ..< min {
                let (ps, pe) = try build(inner, pattern: pattern)
                empties[end].append(ps)
                end = pe
            }
            if let max {
                let e = add()
                empties[end].append(e)
                for _ in min ..< Swift.max(min, max) {
                    let (ps, pe) = try build(inner, pattern: pattern)
                    empties[end].append(ps)
                    empties[pe].append(e)
                    end = pe
                }
                return (s, e)
            }
            let (ls, le) = try build(inner, pattern: pattern)
            let e = add()
            empties[end].append(ls)
            empties[end].append(e)
            empties[le].append(ls)
            empties[le].append(e)
            return (s, e)
        }
    }

    /// One scalar whose UTF-8 forms are `sequences` (byte ranges a position), as a few states: the
    /// rest of a sequence after its first byte is a state shared with every other sequence that
    /// ends alike (all eight rows of well-formed UTF-8 end in one, two or three continuation
    /// bytes), and the start has one edge to each such state, on all the first bytes that lead there. A chain of states per sequence, under counted repetition, made
    /// `[^é]{64}` too large a subset construction to build.
    private mutating func scalars(_ sequences: [[ClosedRange<UInt8>]]) -> (Int, Int) {
        let s = add(), e = add()
        var ends: [[ClosedRange<UInt8>]: Int] = [[]: e]   // a state for each way a sequence goes on
        var firsts: [Int: ByteSet] = [:]                   // the first bytes leading to each of those
        for sequence in sequences {
            var next = e
            for j in stride(from: sequence.count - 1, through: 1, by: -1) {
                let rest = Array(sequence[j...])
                if let known = ends[rest] { next = known; continue }
                let state = add()
                edges[state].append((ByteSet(range: sequence[j]), next))
                ends[rest] = state
                next = state
            }
            firsts[next, default: ByteSet()] = firsts[next, default: ByteSet()].union(ByteSet(range: sequence[0]))
        }
        for (next, bytes) in firsts.sorted(by: { $0.key < $1.key }) { edges[s].append((bytes, next)) }
        return (s, e)
    }
}

/// Epsilon closures of NFA state sets, with one reusable visit mark per state (the subset
/// construction takes thousands of closures; a `Set` per closure dominated its time).
struct ClosureBuilder {
    private let empties: [[Int]]
    private var mark: [Int]
    private var epoch = 0

    init(_ nfa: NFA) {
        empties = nfa.empties
        mark = [Int](repeating: -1, count: nfa.empties.count)
    }

    /// The states reachable from `states` by empty edges (`states` included), ascending.
    mutating func closure(_ states: [Int]) -> [Int] {
        epoch += 1
        var out: [Int] = [], stack: [Int] = []
        for s in states where mark[s] != epoch {
            mark[s] = epoch
            out.append(s)
            stack.append(s)
        }
        while let s = stack.popLast() {
            for t in empties[s] where mark[t] != epoch {
                mark[t] = epoch
                out.append(t)
                stack.append(t)
            }
        }
        return out.sorted()
    }
}

/// A recursive-descent parser for the supported regex subset.
struct PatternParser {
    let b: [UInt8]
    let pattern: String
    var i = 0
    /// Groups open around the current position.
    var groups = 0

    /// Groups nested deeper than this are refused rather than recursed into (parsing and
    /// building recurse once a group: 200 nested groups overflowed a 512 KiB stack in a debug build).
    static let groupDepthLimit = 32

    init(_ bytes: [UInt8], pattern: String) {
        b = bytes
        self.pattern = pattern
    }

    func fail(_ reason: String) -> GenerationSchema.SchemaError { .unsupportedPattern(pattern, reason: reason) }

    mutating func parse() throws -> PatternNode {
        if i < b.count, b[i] == UInt8(ascii: "^") { i += 1 }
        let node = try alternation()
        guard i == b.count else { throw fail("unbalanced ')' at byte \(i)") }
        return node
    }

    private mutating func alternation() throws -> PatternNode {
        var options = [try sequence()]
        while i < b.count, b[i] == UInt8(ascii: "|") {
            i += 1
            options.append(try sequence())
        }
        return options.count == 1 ? options[0] : .alternation(options)
    }

    private mutating func sequence() throws -> PatternNode {
        var parts: [PatternNode] = []
        while i < b.count, b[i] != UInt8(ascii: "|"), b[i] != UInt8(ascii: ")") {
            if b[i] == UInt8(ascii: "$"), i == b.count - 1 { i += 1; break }
            if b[i] == UInt8(ascii: "$") || b[i] == UInt8(ascii: "^") { throw fail("anchors inside a pattern are not supported") }
            var atom = try self.atom()
            atom = try quantified(atom)
            parts.append(atom)
        }
        return parts.count == 1 ? parts[0] : .sequence(parts)
    }

    private mutating func quantified(_ atom: PatternNode) throws -> PatternNode {
        guard i < b.count else { return atom }
        var result: PatternNode
        switch b[i] {
        case UInt8(ascii: "*"): result = .repeated(atom, min: 0, max: nil); i += 1
        case UInt8(ascii: "+"): result = .repeated(atom, min: 1, max: nil); i += 1
        case UInt8(ascii: "?"): result = .repeated(atom, min: 0, max: 1); i += 1
        case UInt8(ascii: "{"):
            // As Swift's `Regex` reads it: spaces allowed inside, `{,m}` is `{0,m}`; anything
            // else (`{}`, `{,}`, an unclosed brace) is a literal '{'.
            let save = i
            i += 1
            skipSpaces()
            var lo = number()
            var hi: Int? = lo
            skipSpaces()
            if i < b.count, b[i] == UInt8(ascii: ",") {
                i += 1
                skipSpaces()
                hi = number()
                skipSpaces()
                if lo == nil, hi != nil { lo = 0 }
            }
            guard let lo, i < b.count, b[i] == UInt8(ascii: "}") else {
                i = save   // a literal '{'
                return atom
            }
            i += 1
            if let hi, hi < lo { throw fail("{\(lo),\(hi)} has its bounds reversed") }
            result = .repeated(atom, min: lo, max: hi)
        default: return atom
        }
        if i < b.count, b[i] == UInt8(ascii: "?") || b[i] == UInt8(ascii: "+") { i += 1 }
        return result
    }

    private mutating func skipSpaces() {
        while i < b.count, b[i] == UInt8(ascii: " ") { i += 1 }
    }

    private mutating func number() -> Int? {
        var n: Int?
        while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
            n = (n ?? 0) * 10 + Int(b[i] - 0x30)
            i += 1
            if n! > 1_000_000 { return n }
        }
        return n
    }

    private mutating func atom() throws -> PatternNode {
        let c = b[i]
        switch c {
        case UInt8(ascii: "("):
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "?") {
                guard i + 1 < b.count, b[i + 1] == UInt8(ascii: ":") else { throw fail("lookaround and named groups are not supported") }
                i += 2
            }
            groups += 1
            defer { groups -= 1 }
            guard groups <= Self.groupDepthLimit else { throw fail("groups nested deeper than \(Self.groupDepthLimit)") }
            let inner = try alternation()
            guard i < b.count, b[i] == UInt8(ascii: ")") else { throw fail("unclosed '('") }
            i += 1
            return inner
        case UInt8(ascii: "["): return try characterClass()
        case UInt8(ascii: "."):
            i += 1
            return .asciiOr(ByteSet.patternContent.subtracting(ByteSet.newlines), ScalarRanges.standalone)
        case UInt8(ascii: "\\"):
            i += 1
            guard i < b.count else { throw fail("a trailing backslash") }
            let letter = b[i], set = try escape(inClass: false)
            switch letter {
            case UInt8(ascii: "D"): return .asciiOr(set, ScalarRanges.standaloneNonDigits)
            case UInt8(ascii: "W"): return .asciiOr(set, ScalarRanges.standaloneNonWord)
            case UInt8(ascii: "S"): return .asciiOr(set, ScalarRanges.standalone)
            default: return .bytes(set)
            }
        case UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "?"):
            throw fail("a quantifier with nothing to repeat at byte \(i)")
        default:
            // One UTF-8 scalar, as its bytes in sequence.
            let length = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4
            let scalar = b[i ..< min(b.count, i + length)]
            i += scalar.count
            return scalar.count == 1 ? .bytes(ByteSet([c])) : .sequence(scalar.map { .bytes(ByteSet([$0])) })
        }
    }

    private mutating func escape(inClass: Bool) throws -> ByteSet {
        let e = b[i]
        i += 1
        let digits = ByteSet(range: 0x30 ... 0x39)
        let word = digits.union(ByteSet(range: 0x41 ... 0x5A)).union(ByteSet(range: 0x61 ... 0x7A)).union(ByteSet([0x5F]))
        // No carriage return unless the pattern names it (`\r`): before a line feed it would make
        // one character of the two, and a match of two no longer one under `Regex`'s default semantics.
        let space = ByteSet([0x20, 0x09, 0x0A]), wild = ByteSet.patternContent.subtracting(ByteSet([0x0D]))
        switch e {
        case UInt8(ascii: "d"): return digits
        case UInt8(ascii: "w"): return word
        case UInt8(ascii: "s"): return space
        case UInt8(ascii: "D"): return wild.subtracting(digits)
        case UInt8(ascii: "W"): return wild.subtracting(word)
        case UInt8(ascii: "S"): return wild.subtracting(space)
        case UInt8(ascii: "1") ... UInt8(ascii: "9"): throw fail("backreferences are not supported")
        case UInt8(ascii: "b"), UInt8(ascii: "B"): throw fail("word boundaries are not supported")
        case UInt8(ascii: "n"): return ByteSet([0x0A])
        case UInt8(ascii: "t"): return ByteSet([0x09])
        case UInt8(ascii: "r"): return ByteSet([0x0D])
        default:
            guard e < 0x80, !(e >= 0x30 && e <= 0x39), !((e | 0x20) >= 0x61 && (e | 0x20) <= 0x7A) else {
                throw fail("unknown escape \\\(Character(UnicodeScalar(e)))")
            }
            return ByteSet([e])
        }
    }

    private mutating func characterClass() throws -> PatternNode {
        i += 1
        var negated = false
        if i < b.count, b[i] == UInt8(ascii: "^") { negated = true; i += 1 }
        var set = ByteSet()
        var wide: [ClosedRange<UInt32>] = []   // the members beyond ASCII, as scalar values
        // What a negated class may produce beyond ASCII: `standalone`, less what `\d` and `\w`
        // members take there; nothing when a member is `\D`, `\W` or `\S` (which take most of it).
        var beyond = ScalarRanges.standalone
        func add(_ lo: UInt32, _ hi: UInt32) {
            if lo < 0x80 { set = set.union(ByteSet(range: UInt8(lo) ... UInt8(min(hi, 0x7F)))) }
            if hi >= 0x80 { wide.append(max(lo, 0x80) ... hi) }
        }
        var first = true
        while i < b.count, b[i] != UInt8(ascii: "]") || first {
            first = false
            let lo: UInt32
            if b[i] == UInt8(ascii: "\\") {
                i += 1
                guard i < b.count else { throw fail("a trailing backslash") }
                switch b[i] {
                case UInt8(ascii: "d"): beyond = ScalarRanges.subtracting(ScalarRanges.complement(ScalarRanges.standaloneNonDigits), from: beyond)
                case UInt8(ascii: "w"): beyond = ScalarRanges.subtracting(ScalarRanges.complement(ScalarRanges.standaloneNonWord), from: beyond)
                case UInt8(ascii: "D"), UInt8(ascii: "W"), UInt8(ascii: "S"): beyond = []
                default: break
                }
                let s = try escape(inClass: true)
                if s.words.0.nonzeroBitCount + s.words.1.nonzeroBitCount + s.words.2.nonzeroBitCount + s.words.3.nonzeroBitCount != 1 {
                    set = set.union(s)
                    continue
                }
                lo = UInt32((0 ... 255).first { s.contains(UInt8($0)) }!)
            } else {
                guard b[i] != UInt8(ascii: "[") else { throw fail("nested classes and class set operations are not supported") }
                lo = scalar()
            }
            if i + 1 < b.count, b[i] == UInt8(ascii: "-"), b[i + 1] != UInt8(ascii: "]") {
                i += 1
                if b[i] == UInt8(ascii: "\\"), i + 1 < b.count { i += 1 }
                let hi = scalar()
                guard hi >= lo else { throw fail("range \(Character(Unicode.Scalar(lo)!))-\(Character(Unicode.Scalar(hi)!)) is reversed") }
                add(lo, hi)
            } else {
                add(lo, lo)
            }
        }
        guard i < b.count else { throw fail("unclosed '['") }
        i += 1
        let ascii = set.subtracting(ByteSet.all.subtracting(ByteSet.patternContent))
        if negated {   // no carriage return either (see `escape`)
            return .asciiOr(ByteSet.patternContent.subtracting(set).subtracting(ByteSet([0x0D])), ScalarRanges.subtracting(wide, from: beyond))
        }
        return wide.isEmpty ? .bytes(ascii) : .alternation([.bytes(ascii), .scalars(wide)])
    }

    /// The scalar whose UTF-8 starts at `i` (the pattern is a `String`, so its bytes are
    /// well-formed), moving past it.
    private mutating func scalar() -> UInt32 {
        let lead = b[i]
        let length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4
        var value = length == 1 ? UInt32(lead) : UInt32(lead) & (0x7F >> length)
        for k in 1 ..< length where i + k < b.count { value = value << 6 | UInt32(b[i + k] & 0x3F) }
        i = min(b.count, i + length)
        return value
    }
}
