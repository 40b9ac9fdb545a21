/// A ``KVCache`` whose K/V rows for all positions are allocated once, up front.
///
/// Memory is `capacity × 2 × layerCount × kvDim × 4` bytes; decoding never
/// allocates. Layout: `[layerCount][keys, values][capacity][kvDim]`.
public final class DenseKVCache: KVCache {
    /// Number of transformer blocks.
    public let layerCount: Int
    /// Width of one K (or V) row.
    public let kvDim: Int
    /// Maximum number of positions.
    public let capacity: Int
    /// Token ids with valid rows.
    public private(set) var tokens: [Int]
    private let storage: FloatBuffer

    /// An empty cache.
    /// - Parameters:
    ///   - layerCount: transformer blocks.
    ///   - kvDim: width of one K (or V) row.
    ///   - capacity: maximum positions (usually the model's context length).
    public init(layerCount: Int, kvDim: Int, capacity: Int) {
        precondition(layerCount > 0 && kvDim > 0 && capacity > 0, "DenseKVCache needs positive sizes")
        self.layerCount = layerCount
        self.kvDim = kvDim
        self.capacity = capacity
        storage = FloatBuffer(count: layerCount * 2 * capacity * kvDim)
        tokens = []
        tokens.reserveCapacity(capacity)
    }

    /// Key rows of `layer`, `[capacity, kvDim]`.
    public func keys(layer: Int) -> Matrix { rows(layer: layer, slot: 0) }

    /// Value rows of `layer`, `[capacity, kvDim]`.
    public func values(layer: Int) -> Matrix { rows(layer: layer, slot: 1) }

    /// Records `tokens` as the contents of the next rows.
    /// - Complexity: O(`tokens.count`).
    public func append(_ tokens: ArraySlice<Int>) {
        precondition(self.tokens.count + tokens.count <= capacity, "append beyond the cache capacity")
        self.tokens.append(contentsOf: tokens)
    }

    /// Keeps positions `0 ..< count`.
    /// - Complexity: O(removed positions) to drop their token ids; no K/V data moves.
    public func truncate(to count: Int) {
        let kept = max(0, min(count, tokens.count))
        tokens.removeSubrange(kept...)
    }

    private func rows(layer: Int, slot: Int) -> Matrix {
        precondition(layer >= 0 && layer < layerCount, "layer out of range")
        return Matrix(buffer: storage, offset: (2 * layer + slot) * capacity * kvDim, rows: capacity, cols: kvDim)
    }
}
