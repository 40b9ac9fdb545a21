/// A ``KVCache`` that allocates K/V rows in large chunks as the sequence grows, up to a maximum.
///
/// For sessions that rarely fill the context: memory follows use, in steps of
/// `chunkPositions` positions (growing copies the valid rows once per step, never per
/// token). Layout of the current allocation: `[layerCount][keys, values][allocated][kvDim]`.
/// Rows beyond ``count`` are left uninitialised (the forward pass or a restore writes them
/// before anything reads them), so growing touches no memory it does not copy into. The
/// storage is a page-aligned mapping of its own, so a restore from the prefix store's files
/// can map whole pages of a file over rows instead of copying them (copy-on-write).
public final class GrowingKVCache: KVCache {
    /// Number of transformer blocks.
    public let layerCount: Int
    /// Width of one K (or V) row.
    public let kvDim: Int
    /// Maximum number of positions.
    public let capacity: Int
    /// Positions added per growth step.
    public let chunkPositions: Int
    /// Token ids with valid rows.
    public private(set) var tokens: [Int] = []
    /// Positions currently allocated.
    public private(set) var allocatedPositions: Int
    private var storage: FloatBuffer

    /// An empty cache with one chunk allocated.
    /// - Parameters:
    ///   - layerCount: transformer blocks.
    ///   - kvDim: width of one K (or V) row.
    ///   - capacity: maximum positions.
    ///   - chunkPositions: growth step, in positions.
    public init(layerCount: Int, kvDim: Int, capacity: Int, chunkPositions: Int = 256) {
        precondition(layerCount > 0 && kvDim > 0 && capacity > 0 && chunkPositions > 0, "GrowingKVCache needs positive sizes")
        self.layerCount = layerCount
        self.kvDim = kvDim
        self.capacity = capacity
        self.chunkPositions = chunkPositions
        allocatedPositions = min(capacity, chunkPositions)
        do { storage = try FloatBuffer(pageMappedCount: layerCount * 2 * allocatedPositions * kvDim) } catch {
            preconditionFailure("\(error)")
        }
        tokens.reserveCapacity(allocatedPositions)
    }

    /// Key rows of `layer`, `[allocatedPositions, kvDim]`.
    public func keys(layer: Int) -> Matrix { rows(layer: layer, slot: 0) }

    /// Value rows of `layer`, `[allocatedPositions, kvDim]`.
    public func values(layer: Int) -> Matrix { rows(layer: layer, slot: 1) }

    /// Grows the allocation (in whole chunks, at most to ``capacity``) so `positions` rows fit.
    /// - Complexity: O(count × layers × kvDim) when it grows, O(1) otherwise.
    /// - Throws: ``RuntimeError/allocationFailed(bytes:)`` when the system refuses; the cache is then unchanged.
    public func reserve(positions: Int) throws {
        guard positions > allocatedPositions else { return }
        let grown = min(capacity, (positions + chunkPositions - 1) / chunkPositions * chunkPositions)
        let old = (0 ..< layerCount).map { (keys(layer: $0), values(layer: $0)) }
        let (floats, overflow) = (layerCount * 2 * kvDim).multipliedReportingOverflow(by: grown)
        storage = try FloatBuffer(pageMappedCount: overflow ? -1 : floats)   // rows beyond `count` are scratch
        allocatedPositions = grown
        for (layer, (k, v)) in old.enumerated() {
            Kernels.copy(k.rows(0 ..< count), into: keys(layer: layer).rows(0 ..< count))
            Kernels.copy(v.rows(0 ..< count), into: values(layer: layer).rows(0 ..< count))
        }
        tokens.reserveCapacity(grown)
    }

    /// Records `tokens` as the contents of the next rows.
    public func append(_ tokens: ArraySlice<Int>) {
        precondition(self.tokens.count + tokens.count <= allocatedPositions, "append beyond the allocated rows")
        self.tokens.append(contentsOf: tokens)
    }

    /// Keeps positions `0 ..< count` (the allocation stays).
    public func truncate(to count: Int) {
        tokens.removeSubrange(max(0, min(count, tokens.count))...)
    }

    private func rows(layer: Int, slot: Int) -> Matrix {
        precondition(layer >= 0 && layer < layerCount, "layer out of range")
        return Matrix(buffer: storage, offset: (2 * layer + slot) * allocatedPositions * kvDim,
                      rows: allocatedPositions, cols: kvDim)
    }
}
