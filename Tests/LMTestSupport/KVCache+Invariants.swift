import LMRuntime

/// How far a cache is from a fresh prefill of its own tokens.
public struct CacheDeviation: CustomStringConvertible {
    /// Largest relative difference of any K or V element in positions `0..<count`.
    public var maxRelativeError: Float
    /// The cache's token count.
    public var count: Int

    public var description: String { "\(count) tokens, max relative K/V error \(maxRelativeError)" }
}

extension KVCache {
    /// Compares every valid K/V row with a fresh one-shot prefill of ``tokens`` on `model`
    /// (the DESIGN.md cache-exactness invariant). An empty cache has no rows to compare.
    public func deviationFromFreshPrefill(_ model: Transformer) throws -> CacheDeviation {
        guard count > 0 else { return CacheDeviation(maxRelativeError: 0, count: 0) }
        let fresh = model.makeCache(capacity: capacity)
        try model.forward(tokens, cache: fresh)
        var worst: Float = 0
        for layer in 0 ..< layerCount {
            for (mine, theirs) in [(keys(layer: layer), fresh.keys(layer: layer)),
                                   (values(layer: layer), fresh.values(layer: layer))] {
                worst = max(worst, Fixtures.maxRelativeError(mine.rows(0 ..< count).toArray(),
                                                              theirs.rows(0 ..< count).toArray()))
            }
        }
        return CacheDeviation(maxRelativeError: worst, count: count)
    }

    /// A copy of the valid K/V rows of every layer, for before/after comparisons.
    public func snapshotRows(_ range: Range<Int>) -> [[Float]] {
        (0 ..< layerCount).flatMap { [keys(layer: $0).rows(range).toArray(), values(layer: $0).rows(range).toArray()] }
    }
}
