/// Strings of several shapes decoded together: free text, a pattern, fixed choices. One
/// deterministic automaton runs over the JSON text between the quotes, each of its states the
/// states of every shape at once (the product of their automata), so the decoder never has to
/// guess which shape it is writing. The closing quote ends the string where some shapes accept
/// it, and what follows is the rest of those shapes' branches, decoded together again (an
/// ending, see ``endings``). So `"km"` may be a fixed unit of one structure and free text of
/// another, and the bytes after it tell the two apart, while `"parsec"` is the second's alone.
///
/// Every shape reads the same JSON escapes the same way (a quote inside the text only ever
/// follows a backslash), so an unescaped quote is a transition of no shape: it closes the text.
struct TextUnion: Sendable {
    /// One shape of string, as an automaton over its JSON text between the quotes.
    struct Shape: Sendable {
        /// Transitions: `next[state * 256 + byte]`, or -1 (including into states from which
        /// no whole text is reachable).
        let next: [Int32]
        let accepting: [Bool]

        /// Any JSON string, as ``GrammarState`` reads free text: whole UTF-8 sequences with no
        /// control character, and the escapes `\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t` and `\u`
        /// with four hex digits naming no half of a surrogate pair. States: 0 in the text,
        /// 1-3 continuation bytes pending, 4 after a backslash, 5 before the first hex digit,
        /// 6 before the second after a first `d`, 7 before the second otherwise, 8-9 before the
        /// third and fourth, then one state for each lead byte whose first continuation is
        /// narrower than `80-BF` (``WellFormedUTF8``).
        static let freeText: Shape = {
            let narrow = WellFormedUTF8.sequences.filter { $0.second != WellFormedUTF8.continuation }
            let count = 10 + narrow.count
            var next = [Int32](repeating: -1, count: count * 256)
            func set(_ state: Int, _ bytes: some Sequence<UInt8>, _ to: Int) { for b in bytes { next[state * 256 + Int(b)] = Int32(to) } }
            set(0, (0x20 ..< 0x80).filter { $0 != 0x22 && $0 != 0x5C }, 0)
            var state = 10
            for row in WellFormedUTF8.sequences {
                if row.second == WellFormedUTF8.continuation {
                    set(0, row.lead, row.length - 1)
                } else {
                    set(0, row.lead, state)
                    set(state, row.second, row.length - 2)
                    state += 1
                }
            }
            set(0, [0x5C], 4)
            for pending in 1 ... 3 { set(pending, WellFormedUTF8.continuation, pending - 1) }
            set(4, Array("\"\\/bfnrt".utf8), 0)
            set(4, Array("u".utf8), 5)
            let hex = Array("0123456789abcdefABCDEF".utf8)
            set(5, hex, 7)
            set(5, Array("dD".utf8), 6)
            set(6, Array("01234567".utf8), 8)
            set(7, hex, 8)
            set(8, hex, 9)
            set(9, hex, 0)
            return Shape(next: next, accepting: [true] + Array(repeating: false, count: count - 1))
        }()

        /// A pattern's automaton, without its states that reach no whole match.
        init(_ pattern: PatternAutomaton) {
            accepting = pattern.accepting
            next = pattern.next.map { $0 >= 0 && pattern.distance[Int($0)] != Int.max ? $0 : -1 }
        }

        /// The JSON texts of `choices` (each as ``GeneratedContent`` quotes it, without the quotes), as a trie.
        init(choices: [String]) {
            var next = [Int32](repeating: -1, count: 256), accepting = [false]
            for choice in choices {
                var quoted = ""
                GeneratedContent.quote(choice, into: &quoted)
                var state = 0
                for byte in quoted.utf8.dropFirst().dropLast() {
                    if next[state * 256 + Int(byte)] < 0 {
                        next[state * 256 + Int(byte)] = Int32(accepting.count)
                        next += [Int32](repeating: -1, count: 256)
                        accepting.append(false)
                    }
                    state = Int(next[state * 256 + Int(byte)])
                }
                accepting[state] = true
            }
            self.next = next
            self.accepting = accepting
        }

        private init(next: [Int32], accepting: [Bool]) {
            self.next = next
            self.accepting = accepting
        }
    }

    /// The most states the automaton of shapes decoded together may have.
    static let maximumStates = 4096

    /// Transitions: `next[state * 256 + byte]`, or -1. State 0 is the start, just after the opening quote.
    let next: [Int32]
    /// The index in ``endings`` of the shapes that accept the text at each state (-1: none).
    let ending: [Int32]
    /// Each set of shapes that may end together (indices into the shapes given, ascending).
    let endings: [[Int]]
    /// The fewest bytes from each state to the end of the value: to an ending, its closing quote,
    /// and the shortest of what follows that ending (``measure(after:)``; `Int.max`: no ending is reachable).
    private(set) var distance: [Int] = []

    /// The automaton of `shapes` read together (their product, its reachable states only).
    /// - Throws: `unsupportedShape` naming `choice` when it would take more than ``maximumStates``.
    init(_ shapes: [Shape], choice: String) throws {
        var index: [[Int32]: Int] = [:], states: [[Int32]] = [shapes.map { _ in 0 }]
        index[states[0]] = 0
        var next: [Int32] = [], ending: [Int32] = [], endings: [[Int]] = [], endingIndex: [[Int]: Int] = [:]
        var i = 0
        while i < states.count {
            let state = states[i]
            let accepted = shapes.indices.filter { state[$0] >= 0 && shapes[$0].accepting[Int(state[$0])] }
            if accepted.isEmpty {
                ending.append(-1)
            } else {
                if endingIndex[accepted] == nil { endingIndex[accepted] = endings.count; endings.append(accepted) }
                ending.append(Int32(endingIndex[accepted]!))
            }
            var row = [Int32](repeating: -1, count: 256)
            for byte in 0 ..< 256 {
                let target = shapes.indices.map { s in state[s] < 0 ? -1 : shapes[s].next[Int(state[s]) * 256 + byte] }
                guard target.contains(where: { $0 >= 0 }) else { continue }
                if let known = index[target] {
                    row[byte] = Int32(known)
                    continue
                }
                guard states.count < Self.maximumStates else {
                    throw GenerationSchema.SchemaError.unsupportedShape(
                        "a choice (\(choice)) between strings whose shapes read together take more than \(Self.maximumStates) states")
                }
                index[target] = states.count
                row[byte] = Int32(states.count)
                states.append(target)
            }
            next += row
            i += 1
        }
        self.next = next
        self.ending = ending
        self.endings = endings
    }

    @inline(__always) func step(_ state: Int, _ byte: UInt8) -> Int { Int(next[state &* 256 &+ Int(byte)]) }

    /// Sets ``distance`` from the fewest bytes after each ending's closing quote (`after[e]`
    /// for ending `e`): a shortest-path search backwards from the endings, each byte one.
    mutating func measure(after: [Int]) {
        let count = ending.count
        var distance = ending.map { $0 < 0 ? Int.max : 1 + after[Int($0)] }
        var reverse = [[Int]](repeating: [], count: count)
        for from in 0 ..< count {
            for b in 0 ..< 256 where next[from * 256 + b] >= 0 { reverse[Int(next[from * 256 + b])].append(from) }
        }
        // Sources of different costs, edges of one: settle states in order of distance, one bucket per distance.
        let finite = distance.filter { $0 != Int.max }
        var buckets = [[Int]](repeating: [], count: (finite.max() ?? 0) + count + 1)
        for s in 0 ..< count where distance[s] != Int.max { buckets[distance[s]].append(s) }
        for d in buckets.indices {
            var k = 0
            while k < buckets[d].count {
                let s = buckets[d][k]
                k += 1
                guard distance[s] == d else { continue }   // reached more cheaply since it was queued
                for p in reverse[s] where d + 1 < distance[p] {
                    distance[p] = d + 1
                    buckets[d + 1].append(p)
                }
            }
        }
        self.distance = distance
    }
}
