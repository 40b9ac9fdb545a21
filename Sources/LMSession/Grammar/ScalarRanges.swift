/// Sets of non-ASCII Unicode scalars as ranges of scalar values, and their UTF-8 forms as byte
/// automata: what a pattern's class with non-ASCII members (`[à-ÿ€]`, `[^é]`) matches beyond ASCII.
enum ScalarRanges {
    /// The non-ASCII scalar values: U+0080 through U+10FFFF, surrogates left out by `utf8Sequences`.
    static let nonASCII: ClosedRange<UInt32> = 0x80 ... 0x10FFFF

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
