import Foundation

/// The grammar of a bounded JSON number, `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, checked byte by
/// byte: after every byte some completion must still land within the bounds, so a range
/// guide cannot be broken (and `remaining` says how many bytes the shortest one takes).
///
/// Integer parts have at most 15 digits (every value is exact in a `Double`); fractions at
/// most 6. Unbounded numbers default to ±10¹².
struct NumberRule: Sendable {
    let minimum: Double
    let maximum: Double
    let integral: Bool
    static let maximumIntegerDigits = 15
    static let maximumFractionDigits = 6
    static let defaultBound = 1e12

    /// A number being written.
    struct State: Sendable, Hashable {
        var negative = false
        var integerDigits = 0
        var integerValue: Int64 = 0
        var hasPoint = false
        var fractionDigits = 0
        var fractionValue: Int64 = 0
    }

    init(minimum: Double?, maximum: Double?, integral: Bool) throws {
        self.minimum = minimum ?? -Self.defaultBound
        self.maximum = maximum ?? Self.defaultBound
        self.integral = integral
        guard self.minimum.isFinite, self.maximum.isFinite, self.minimum <= self.maximum else {
            throw GenerationSchema.SchemaError.unsupportedShape("a number range \(self.minimum)...\(self.maximum)")
        }
    }

    /// The state after `byte`, or `nil` when `byte` is not part of the number (or leaves no
    /// completion within bounds).
    func step(_ s: State, _ byte: UInt8) -> State? {
        var n = s
        switch byte {
        case UInt8(ascii: "-"):
            guard !s.negative, s.integerDigits == 0 else { return nil }
            n.negative = true
        case UInt8(ascii: "."):
            guard !integral, !s.hasPoint, s.integerDigits > 0 else { return nil }
            n.hasPoint = true
        case UInt8(ascii: "0") ... UInt8(ascii: "9"):
            let d = Int64(byte - 0x30)
            if s.hasPoint {
                guard s.fractionDigits < Self.maximumFractionDigits else { return nil }
                n.fractionDigits += 1
                n.fractionValue = s.fractionValue * 10 + d
            } else {
                guard s.integerDigits < Self.maximumIntegerDigits, !(s.integerDigits == 1 && s.integerValue == 0) else { return nil }
                n.integerDigits += 1
                n.integerValue = s.integerValue * 10 + d
            }
        default: return nil
        }
        return remaining(n) == nil ? nil : n
    }

    /// Whether the number may end here (it is well formed and within bounds).
    func isComplete(_ s: State) -> Bool { remaining(s) == 0 }

    /// The fewest bytes that complete `s` within bounds; `nil` when none does.
    func remaining(_ s: State) -> Int? {
        if s.integerDigits == 0, !s.negative {
            // Nothing yet: a non-negative number, or a sign and a negative one.
            let plus = remaining(negative: false, s)
            let minus = remaining(negative: true, s).map { $0 + 1 }
            switch (plus, minus) {
            case let (a?, b?): return min(a, b)
            default: return plus ?? minus
            }
        }
        return remaining(negative: s.negative, s)
    }

    private func remaining(negative: Bool, _ s: State) -> Int? {
        // Magnitudes that must be reached.
        let low = negative ? -maximum : minimum, high = negative ? -minimum : maximum
        guard high >= 0 || !negative else { return nil }
        if s.hasPoint {
            let base = Double(s.integerValue) + Double(s.fractionValue) / pow(10, Double(s.fractionDigits))
            for k in (s.fractionDigits == 0 ? 1 : 0) ... (Self.maximumFractionDigits - s.fractionDigits) {
                let step = pow(10, -Double(s.fractionDigits + k)), count = pow(10, Double(k))
                if Self.gridHits(start: base, step: step, count: count, low: low, high: high) { return k }
            }
            return nil
        }
        var best: Int?
        let maxExtra = Self.maximumIntegerDigits - s.integerDigits
        let fixedZero = s.integerDigits == 1 && s.integerValue == 0
        for j in (s.integerDigits == 0 ? 1 : 0) ... max(0, fixedZero ? 0 : maxExtra) {
            if let best, j >= best { break }
            let scale = pow(10, Double(j))
            let a: Double, b: Double
            if s.integerDigits == 0 {
                a = j == 1 ? 0 : pow(10, Double(j - 1))
                b = scale - 1
            } else {
                a = Double(s.integerValue) * scale
                b = a + scale - 1
            }
            if a > high { break }
            // Integer part only.
            if Self.gridHits(start: a, step: 1, count: b - a + 1, low: low, high: high) {
                best = j
                break
            }
            guard !integral else { continue }
            // With a fraction: a point and k digits.
            for k in 1 ... Self.maximumFractionDigits where best.map({ j + 1 + k < $0 }) ?? true {
                let step = pow(10, -Double(k))
                if Self.gridHits(start: a, step: step, count: (b - a + 1) / step, low: low, high: high) {
                    best = j + 1 + k
                    break
                }
            }
        }
        return best
    }

    /// Whether `start + i * step` lies in `[low, high]` for some `0 ≤ i < count`.
    static func gridHits(start: Double, step: Double, count: Double, low: Double, high: Double) -> Bool {
        let epsilon = 1e-9
        let first = max(0, ((low - start) / step - epsilon).rounded(.up))
        let last = min(count - 1, ((high - start) / step + epsilon).rounded(.down))
        return first <= last
    }

    /// The value of a complete state.
    func value(_ s: State) -> Double {
        let magnitude = Double(s.integerValue) + Double(s.fractionValue) / pow(10, Double(s.fractionDigits))
        return s.negative ? -magnitude : magnitude
    }
}
