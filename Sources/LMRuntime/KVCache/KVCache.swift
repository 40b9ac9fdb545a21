/// Per-sequence key/value storage for every layer, and the tokens it was computed for.
///
/// Invariant: row `i` of every layer's keys and values is the projection of
/// `tokens[i]` at position `i` given `tokens[0..<i]`, for `i < tokens.count`.
/// Rows at `tokens.count...` are scratch: the forward pass writes new K/V rows
/// there directly, then records the tokens with ``append(_:)``.
///
/// The transformer sees only this protocol; persistence and statistics live
/// in other types.
public protocol KVCache: AnyObject {
    /// Number of transformer blocks the cache holds rows for.
    var layerCount: Int { get }
    /// Width of one K (or V) row.
    var kvDim: Int { get }
    /// Maximum number of positions.
    var capacity: Int { get }
    /// Token ids whose K/V rows are valid, position 0 first.
    var tokens: [Int] { get }
    /// Key rows of `layer`, `[capacity, kvDim]`.
    func keys(layer: Int) -> Matrix
    /// Value rows of `layer`, `[capacity, kvDim]`.
    func values(layer: Int) -> Matrix
    /// Records that rows `count ..< count + tokens.count` of every layer now hold `tokens`.
    /// - Complexity: O(`tokens.count`), no allocation within capacity.
    func append(_ tokens: ArraySlice<Int>)
    /// Keeps positions `0 ..< min(count, self.count)` and forgets the rest; rows kept are unchanged.
    /// - Complexity: O(1) amortised; no K/V data moves.
    func truncate(to count: Int)
    /// Makes room for `positions` rows (at most ``capacity``) before a forward pass writes them;
    /// views from ``keys(layer:)`` taken earlier may then be stale.
    /// - Throws: ``RuntimeError/allocationFailed(bytes:)`` when growing fails; the cache is then unchanged.
    func reserve(positions: Int) throws
}

extension KVCache {
    /// Caches allocated up front have room already.
    public func reserve(positions: Int) {}

    /// Number of positions with valid rows.
    public var count: Int { tokens.count }

    /// Bytes of K/V storage per position: `2 × layers × kvDim × 4`.
    public var bytesPerToken: Int { 2 * layerCount * kvDim * MemoryLayout<Float>.stride }

    /// Length of the longest common prefix of ``tokens`` and `other`.
    /// - Complexity: O(min(count, other.count)).
    public func commonPrefixLength(with other: some Collection<Int>) -> Int {
        var n = 0
        for (a, b) in zip(tokens, other) {
            guard a == b else { break }
            n += 1
        }
        return n
    }
}
