/// Sets of non-ASCII Unicode scalars as ranges of scalar values, and their UTF-8 forms as byte
/// automata: what a pattern's class with non-ASCII members (`[à-ÿ€]`, `[^é]`) matches beyond ASCII.
enum ScalarRanges {
    /// The non-ASCII scalar values: U+0080 through U+10FFFF, surrogates left out by `utf8Sequences`.
    static let nonASCII: ClosedRange<UInt32> = 0x80 ... 0x10FFFF

    /// The non-ASCII scalars a pattern's wildcards (`.`, negated classes, `\S`) produce: each one
    /// is a character of its own whatever comes before or after it, so a match holds under
    /// Swift's `Regex` with its default (grapheme-cluster) semantics as well as scalar by scalar.
    /// Left out: combining and spacing marks, joiners, prepended marks, regional indicators,
    /// Hangul jamo, emoji modifiers (each joins a neighbour into one character), line and
    /// paragraph separators and the other line breaks (`.` takes none), whitespace, and the
    /// blocks that mix such scalars with letters (Hebrew, Arabic, the Indic scripts, Thai...).
    /// What is left: Latin (with Latin-1, the extensions and Vietnamese), Greek, Cyrillic and
    /// Armenian letters, dashes, quotes and other general punctuation, currency signs, arrows,
    /// mathematical and technical symbols, box drawing, shapes, dingbats, CJK ideographs, Hangul
    /// syllables and emoji. The ranges follow UTF-8's lead and second bytes, so their forms share
    /// most of their states and a wildcard repeated 64 times stays inside the automaton's limits.
    static let standalone: [ClosedRange<UInt32>] = [
        0xA1 ... 0x2FF, 0x380 ... 0x47F, 0x4C0 ... 0x57F, 0x1E00 ... 0x1FFF, 0x2010 ... 0x2027, 0x20A0 ... 0x20BF, 0x2100 ... 0x27BF,
        0x4E00 ... 0x9FFF, 0xAC00 ... 0xD79F, 0x1F300 ... 0x1F3FA, 0x1F400 ... 0x1F6FF, 0x1F900 ... 0x1F9FF,
    ]

    /// ``standalone`` without what `Regex` takes for `\d`, which beyond ASCII is every scalar
    /// with a numeric value (`²`, `½`, `Ⅻ`, `①`, and CJK numerals such as `一`, for which the
    /// ideographs are left out whole): what `\D` produces beyond ASCII.
    static let standaloneNonDigits = subtracting([0xB2 ... 0xB3, 0xB9 ... 0xB9, 0xBC ... 0xBE, 0x2150 ... 0x2189, 0x2460 ... 0x24FF,
                                                  0x2776 ... 0x2793, 0x4E00 ... 0x9FFF], from: standalone)

    /// Punctuation, symbols and emoji of ``standalone`` that `Regex` does not take for `\w`
    /// (letters, marks, digits and connector punctuation are word characters): what `\W`
    /// produces beyond ASCII.
    static let standaloneNonWord: [ClosedRange<UInt32>] = [
        0xA1 ... 0xA9, 0xAB ... 0xB1, 0xB4 ... 0xB4, 0xB6 ... 0xB8, 0xBB ... 0xBB, 0xBF ... 0xBF, 0xD7 ... 0xD7, 0xF7 ... 0xF7,
        0x2010 ... 0x2027, 0x20A0 ... 0x20BF, 0x218A ... 0x245F, 0x2500 ... 0x2775, 0x2794 ... 0x27BF, 0x1F300 ... 0x1F3FA,
        0x1F400 ... 0x1F6FF, 0x1F900 ... 0x1F9FF,
    ]

    /// The values of `ranges` that `removed` leaves out, as normalized ranges.
    static func subtracting(_ removed: [ClosedRange<UInt32>], from ranges: [ClosedRange<UInt32>]) -> [ClosedRange<UInt32>] {
        let kept = complement(removed)   // non-ASCII only, as every set here is
        var out: [ClosedRange<UInt32>] = []
        for r in normalized(ranges) {
            for k in kept where k.overlaps(r) { out.append(max(r.lowerBound, k.lowerBound) ... min(r.upperBound, k.upperBound)) }
        }
        return out
    }

    /// `ranges` sorted and merged, so that no two overlap or touch.
    static func normalized(_ ranges: [ClosedRange<UInt32>]) -> [ClosedRange<UInt32>] {
        var merged: [ClosedRange<UInt32>] = []
        for r in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, r.lowerBound <= last.upperBound + 1 {
                merged[merged.count - 1] = last.lowerBound ... max(last.upperBound, r.upperBound)
            } else {
                merged.append(r)
            }
        }
        return merged
    }

    /// The non-ASCII scalar values `ranges` leave out.
    static func complement(_ ranges: [ClosedRange<UInt32>]) -> [ClosedRange<UInt32>] {
        var out: [ClosedRange<UInt32>] = []
        var next = nonASCII.lowerBound
        for r in normalized(ranges) where r.upperBound >= next {
            if r.lowerBound > next { out.append(next ... r.lowerBound - 1) }
            next = r.upperBound + 1
        }
        if next <= nonASCII.upperBound { out.append(next ... nonASCII.upperBound) }
        return out
    }

    /// Sequences of byte ranges whose byte strings are exactly the UTF-8 encodings of the
    /// non-surrogate scalars in `ranges` (values below U+0080 or above U+10FFFF are ignored): each
    /// range is cut where its encodings change length and then until, at every byte position, the
    /// scalars between its ends take every continuation byte or share their leading bytes.
    static func utf8Sequences(_ ranges: [ClosedRange<UInt32>]) -> [[ClosedRange<UInt8>]] {
        var out: [[ClosedRange<UInt8>]] = []
        for r in normalized(ranges) where r.upperBound >= nonASCII.lowerBound && r.lowerBound <= nonASCII.upperBound {
            cut(max(r.lowerBound, nonASCII.lowerBound), min(r.upperBound, nonASCII.upperBound), into: &out)
        }
        return out
    }

    private static func cut(_ s: UInt32, _ e: UInt32, into out: inout [[ClosedRange<UInt8>]]) {
        guard s <= e else { return }
        if s <= 0xDFFF, e >= 0xD800 {   // no surrogates
            if s < 0xD800 { cut(s, 0xD7FF, into: &out) }
            if e > 0xDFFF { cut(0xE000, e, into: &out) }
            return
        }
        for last in [UInt32(0x7FF), 0xFFFF] where s <= last && e > last {   // one encoded length each
            cut(s, last, into: &out)
            cut(last + 1, e, into: &out)
            return
        }
        let length = s <= 0x7FF ? 2 : s <= 0xFFFF ? 3 : 4
        for k in 1 ..< length {
            let low: UInt32 = (1 << (6 * k)) - 1   // the bits of the last k bytes
            guard s & ~low != e & ~low else { continue }
            if s & low != 0 {
                cut(s, s | low, into: &out)
                cut((s | low) + 1, e, into: &out)
                return
            }
            if e & low != low {
                cut(s, (e & ~low) - 1, into: &out)
                cut(e & ~low, e, into: &out)
                return
            }
        }
        let first = Array(UTF8.encode(Unicode.Scalar(s)!)!), last = Array(UTF8.encode(Unicode.Scalar(e)!)!)
        out.append(zip(first, last).map { $0 ... $1 })
    }
}
