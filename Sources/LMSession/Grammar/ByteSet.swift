/// A set of bytes, as four 64-bit words.
struct ByteSet: Hashable, Sendable {
    var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    static func == (a: ByteSet, b: ByteSet) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(words.0); hasher.combine(words.1); hasher.combine(words.2); hasher.combine(words.3)
    }

    init() {}

    init(_ bytes: some Sequence<UInt8>) { for b in bytes { insert(b) } }

    init(range: ClosedRange<UInt8>) { for b in range { insert(b) } }

    func contains(_ b: UInt8) -> Bool {
        let bit = UInt64(1) << UInt64(b & 63)
        switch b >> 6 {
        case 0: return words.0 & bit != 0
        case 1: return words.1 & bit != 0
        case 2: return words.2 & bit != 0
        default: return words.3 & bit != 0
        }
    }

    mutating func insert(_ b: UInt8) {
        let bit = UInt64(1) << UInt64(b & 63)
        switch b >> 6 {
        case 0: words.0 |= bit
        case 1: words.1 |= bit
        case 2: words.2 |= bit
        default: words.3 |= bit
        }
    }

    func union(_ o: ByteSet) -> ByteSet {
        var r = self
        r.words = (words.0 | o.words.0, words.1 | o.words.1, words.2 | o.words.2, words.3 | o.words.3)
        return r
    }

    func intersects(_ o: ByteSet) -> Bool {
        words.0 & o.words.0 != 0 || words.1 & o.words.1 != 0 || words.2 & o.words.2 != 0 || words.3 & o.words.3 != 0
    }

    func subtracting(_ o: ByteSet) -> ByteSet {
        var r = self
        r.words = (words.0 & ~o.words.0, words.1 & ~o.words.1, words.2 & ~o.words.2, words.3 & ~o.words.3)
        return r
    }

    var inverted: ByteSet { ByteSet.all.subtracting(self) }

    static let all = ByteSet(range: 0 ... 255)
    /// Bytes a JSON string may hold unescaped: no control characters, quote or backslash.
    static let stringContent = ByteSet(range: 0x20 ... 0xFF).subtracting(ByteSet([0x22, 0x5C]))
    /// Bytes a pattern may match: those, and the five a JSON string holds as a two-byte escape
    /// (quote, backslash, tab, line feed, carriage return). Other control characters never match.
    static let patternContent = stringContent.union(ByteSet([0x22, 0x5C, 0x09, 0x0A, 0x0D]))
    /// Line feed and carriage return, which `.` does not match (as in Swift's `Regex`).
    static let newlines = ByteSet([0x0A, 0x0D])
}

/// Well-formed UTF-8 (Unicode's table 3-7) beyond ASCII: each lead byte, the range its first
/// continuation byte must lie in (narrower after E0, ED, F0 and F4, which would otherwise spell
/// overlong forms, surrogate halves or code points past U+10FFFF), and the sequence's length.
/// Every free-text and pattern automaton reads non-ASCII text by this one table, so no guided
/// string holds bytes that decode as U+FFFD.
enum WellFormedUTF8 {
    static let sequences: [(lead: ClosedRange<UInt8>, second: ClosedRange<UInt8>, length: Int)] = [
        (0xC2 ... 0xDF, 0x80 ... 0xBF, 2),
        (0xE0 ... 0xE0, 0xA0 ... 0xBF, 3), (0xE1 ... 0xEC, 0x80 ... 0xBF, 3), (0xED ... 0xED, 0x80 ... 0x9F, 3), (0xEE ... 0xEF, 0x80 ... 0xBF, 3),
        (0xF0 ... 0xF0, 0x90 ... 0xBF, 4), (0xF1 ... 0xF3, 0x80 ... 0xBF, 4), (0xF4 ... 0xF4, 0x80 ... 0x8F, 4),
    ]

    /// The row of `sequences` whose lead is `byte`, or nil (ASCII, a continuation byte, or a byte
    /// no well-formed sequence starts with).
    static func row(leading byte: UInt8) -> Int? {
        let row = rows[Int(byte)]
        return row < 0 ? nil : Int(row)
    }

    /// `row(leading:)` for every byte, looked up once per byte of a token while masks are built.
    private static let rows: [Int8] = (0 ... 255).map { byte in
        Int8(sequences.firstIndex { $0.lead.contains(UInt8(byte)) } ?? -1)
    }

    /// Any continuation byte.
    static let continuation: ClosedRange<UInt8> = 0x80 ... 0xBF
}

extension UInt8 {
    /// The value of this byte as a hex digit (`0-9`, `a-f`, `A-F`), or nil.
    var hexDigitValue: Int? {
        switch self {
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): Int(self - UInt8(ascii: "0"))
        case UInt8(ascii: "a") ... UInt8(ascii: "f"): Int(self - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A") ... UInt8(ascii: "F"): Int(self - UInt8(ascii: "A")) + 10
        default: nil
        }
    }
}
