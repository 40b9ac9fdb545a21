/// A small, fast, seedable pseudo-random generator (SplitMix64).
///
/// It exists so that synthetic weights and sampling are identical on every
/// machine and run: the system generator is neither seedable nor stable.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose whole output is determined by `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A float uniform in `[0, 1)`, exact from the top 24 bits of one draw.
    public mutating func nextUnitFloat() -> Float {
        Float(next() >> 40) * 0x1p-24
    }

    /// Derives an independent seed for a named stream (a tensor, a layer) from a base seed.
    public static func derive(_ seed: UInt64, stream: UInt64) -> UInt64 {
        var g = SeededGenerator(seed: seed ^ (stream &* 0xD1B5_4A32_D192_ED03))
        return g.next()
    }
}
