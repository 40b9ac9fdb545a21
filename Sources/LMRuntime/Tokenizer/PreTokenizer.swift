/// How a byte-level BPE vocabulary cuts text into words before merging: the regular expressions
/// of the model families llama.cpp names in `tokenizer.ggml.pre`, written out as scanners.
///
/// Each scanner gives, at a position, the end of the match the model's expression finds there
/// (its alternatives tried in order, each greedy, backtracking as a regex engine would), so a
/// text splits into the same words as under the expression, with no regex engine involved.
/// Letters are Unicode's `L*` categories, numbers `N*`, whitespace the `White_Space` property.
enum PreTokenizer: Sendable, Equatable {
    /// GPT-2's expression: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
    case gpt2
    /// Every number character on its own, then GPT-2's expression on the runs between (SmolLM).
    case smollm
    /// Llama 3's: contractions in either case, a letter run with one optional non-letter,
    /// non-number, non-newline character before it, numbers in threes, punctuation runs with
    /// the newlines after them, whitespace ending in newlines, then GPT-2's whitespace rules.
    case llama3
    /// Qwen2's: Llama 3's with every number character on its own.
    case qwen2

    /// The pre-tokenizer llama.cpp uses for a `tokenizer.ggml.pre` value, if it is one of these.
    init?(ggufName: String) {
        switch ggufName {
        case "gpt-2", "phi-2": self = .gpt2
        case "smollm": self = .smollm
        case "llama-bpe", "llama3", "llama-v3": self = .llama3
        case "qwen2": self = .qwen2
        default: return nil
        }
    }

    /// The `tokenizer.ggml.pre` value written for it.
    var ggufName: String {
        switch self {
        case .gpt2: "gpt-2"
        case .smollm: "smollm"
        case .llama3: "llama-bpe"
        case .qwen2: "qwen2"
        }
    }

    /// Whether a word that is itself a token is taken whole, without merging (Llama 3's vocabulary
    /// is tiktoken's, which ranks whole words rather than merges).
    var takesWholeWords: Bool { self == .llama3 }

    /// `text` cut into words, as ranges of its scalars, in order and covering all of it.
    func words(_ text: [Unicode.Scalar]) -> [Range<Int>] {
        let classes = text.map(CharacterClass.init)
        var out: [Range<Int>] = []
        func scan(_ chunk: Range<Int>, _ match: (Int, Int) -> Int) {
            var i = chunk.lowerBound
            while i < chunk.upperBound {
                let end = match(i, chunk.upperBound)
                out.append(i ..< end)
                i = end
            }
        }
        switch self {
        case .gpt2:
            scan(0 ..< text.count) { gpt2Match(text, classes, $0, $1) }
        case .smollm:   // numbers alone; GPT-2's rules inside each run between them
            var start = 0
            for i in text.indices where classes[i] == .number {
                scan(start ..< i) { gpt2Match(text, classes, $0, $1) }
                out.append(i ..< i + 1)
                start = i + 1
            }
            scan(start ..< text.count) { gpt2Match(text, classes, $0, $1) }
        case .llama3:
            scan(0 ..< text.count) { llama3Match(text, classes, $0, $1, digits: 3) }
        case .qwen2:
            scan(0 ..< text.count) { llama3Match(text, classes, $0, $1, digits: 1) }
        }
        return out
    }

    private enum CharacterClass: Equatable {
        case letter, number, space, other

        init(_ scalar: Unicode.Scalar) {
            let properties = scalar.properties
            if properties.isWhitespace { self = .space; return }
            switch properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter: self = .letter
            case .decimalNumber, .letterNumber, .otherNumber: self = .number
            default: self = .other
            }
        }
    }

    /// The end of the run of `kind` starting at `i` (at most `limit` long).
    private func run(_ classes: [CharacterClass], _ kind: CharacterClass, from i: Int, to end: Int, limit: Int = .max) -> Int {
        var j = i
        while j < end, j - i < limit, classes[j] == kind { j += 1 }
        return j
    }

    /// `'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d` at `i`: the contraction's end, or `nil`.
    private func contraction(_ text: [Unicode.Scalar], _ i: Int, _ end: Int, anyCase: Bool) -> Int? {
        guard text[i] == "'", i + 1 < end else { return nil }
        func letter(_ k: Int) -> Unicode.Scalar? {
            guard k < end else { return nil }
            let s = text[k]
            return anyCase && ("A" ... "Z").contains(s) ? Unicode.Scalar(s.value + 32) : s
        }
        switch letter(i + 1) {
        case "s", "t", "m", "d": return i + 2
        case "r" where letter(i + 2) == "e", "v" where letter(i + 2) == "e", "l" where letter(i + 2) == "l": return i + 3
        default: return nil
        }
    }

    /// `\s+(?!\S)|\s+` at whitespace `i`: the run, less its last character when a non-space follows
    /// and the run has more than one.
    private func whitespace(_ classes: [CharacterClass], _ i: Int, _ end: Int) -> Int {
        let r = run(classes, .space, from: i, to: end)
        return r < end && r - i > 1 ? r - 1 : r
    }

    private func gpt2Match(_ text: [Unicode.Scalar], _ classes: [CharacterClass], _ i: Int, _ end: Int) -> Int {
        if let e = contraction(text, i, end, anyCase: false) { return e }
        let j = text[i] == " " && i + 1 < end ? i + 1 : i   // ` ?` before a letter, number or other run
        if classes[j] != .space { return run(classes, classes[j], from: j, to: end) }
        return whitespace(classes, i, end)
    }

    private func llama3Match(_ text: [Unicode.Scalar], _ classes: [CharacterClass], _ i: Int, _ end: Int, digits: Int) -> Int {
        if let e = contraction(text, i, end, anyCase: true) { return e }
        let c = classes[i]
        if c == .letter { return run(classes, .letter, from: i, to: end) }
        let newline = { (k: Int) in text[k] == "\r" || text[k] == "\n" }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if c != .number, !newline(i), i + 1 < end, classes[i + 1] == .letter { return run(classes, .letter, from: i + 1, to: end) }
        if c == .number { return run(classes, .number, from: i, to: end, limit: digits) }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        let j = text[i] == " " && i + 1 < end ? i + 1 : i
        if classes[j] == .other {
            var e = run(classes, .other, from: j, to: end)
            while e < end, newline(e) { e += 1 }
            return e
        }
        // `\s*[\r\n]+`: through the run's last newline; then `\s+(?!\S)|\s+`
        let r = run(classes, .space, from: i, to: end)
        if let last = (i ..< r).last(where: newline) { return last + 1 }
        return whitespace(classes, i, end)
    }
}
