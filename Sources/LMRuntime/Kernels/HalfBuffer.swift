import Foundation

/// Fixed-size storage of IEEE half-precision bits, allocated once and freed with the object:
/// the weight matrices of an ``WeightPrecision/f16`` model.
final class HalfBuffer: @unchecked Sendable {
    let base: UnsafeMutablePointer<UInt16>
    /// Number of halfs held.
    let count: Int

    /// Allocates `count` zeroed halfs.
    /// - Throws: ``RuntimeError/allocationFailed(bytes:)`` when the size is impossible or the allocation fails.
    init(checkedCount count: Int) throws {
        let (bytes, overflow) = max(count, 1).multipliedReportingOverflow(by: MemoryLayout<UInt16>.stride)
        guard count >= 0, !overflow else { throw RuntimeError.allocationFailed(bytes: .max) }
        if bytes >= LargeMapping.threshold {   // streamed weights: huge pages where offered (zeroed by the system)
            guard let mapping = LargeMapping.map(bytes) else { throw RuntimeError.allocationFailed(bytes: bytes) }
            base = mapping.base.bindMemory(to: UInt16.self, capacity: count)
            mappedByteCount = mapping.length
        } else {
            guard let raw = LargeMapping.alignedAllocation(bytes) else { throw RuntimeError.allocationFailed(bytes: bytes) }
            raw.initializeMemory(as: UInt8.self, repeating: 0, count: bytes)
            base = raw.bindMemory(to: UInt16.self, capacity: max(count, 1))
            mappedByteCount = 0
        }
        self.count = count
    }

    /// Bytes of the buffer's own mapping (large buffers); 0 for storage from the heap.
    private let mappedByteCount: Int

    deinit {
        if mappedByteCount > 0 { munmap(base, mappedByteCount) } else { free(base) }
    }

    /// The bits of half `index`.
    subscript(index: Int) -> UInt16 {
        precondition(index >= 0 && index < count, "index out of bounds")
        return base[index]
    }
}

/// A row-major view of `rows × cols` halfs inside a ``HalfBuffer`` (the f16 counterpart of ``Matrix``).
struct HalfMatrix: Sendable {
    let buffer: HalfBuffer
    let offset: Int
    let rows: Int
    let cols: Int
    let rowStride: Int

    init(buffer: HalfBuffer, offset: Int, rows: Int, cols: Int, rowStride: Int? = nil) {
        let stride = rowStride ?? cols
        precondition(rows >= 0 && cols >= 0 && stride >= cols && offset >= 0, "invalid HalfMatrix shape")
        precondition(rows == 0 || offset + (rows - 1) * stride + cols <= buffer.count, "HalfMatrix exceeds its buffer")
        self.buffer = buffer
        self.offset = offset
        self.rows = rows
        self.cols = cols
        self.rowStride = stride
    }

    func rows(_ range: Range<Int>) -> HalfMatrix {
        precondition(range.lowerBound >= 0 && range.upperBound <= rows, "row range out of bounds")
        return HalfMatrix(buffer: buffer, offset: offset + range.lowerBound * rowStride,
                          rows: range.count, cols: cols, rowStride: rowStride)
    }

    subscript(row: Int, col: Int) -> UInt16 {
        get {
            precondition(row >= 0 && row < rows && col >= 0 && col < cols, "index out of bounds")
            return buffer.base[offset + row * rowStride + col]
        }
        nonmutating set {
            precondition(row >= 0 && row < rows && col >= 0 && col < cols, "index out of bounds")
            buffer.base[offset + row * rowStride + col] = newValue
        }
    }

    /// Pointer to element (0, 0); kernels only.
    var base: UnsafeMutablePointer<UInt16> { buffer.base + offset }
}

/// Float32 blocks a long pass converts half weights (or unpacks packed ones) into before sgemm,
/// and the chunks the skinny kernel converts half weights into: one per band of a projection (so
/// per worker), each `[Kernels.halfBlockRows, width]`. Owned by a transformer's
/// workspace, so passes allocate nothing.
package struct HalfScratch: Sendable {
    private let blocks: Matrix

    /// Blocks wide enough for weight rows of `width` elements.
    package init(width: Int) {
        blocks = .zeros(rows: Kernels.workerCount * Kernels.halfBlockRows, cols: width)
    }

    /// The blocks a transformer with passes of up to `maxBatch` tokens over `weights` needs, or
    /// nil: half weights convert from ``Kernels/halfConversionRows`` rows on, and packed weights
    /// unpack for sgemm beyond ``Kernels/skinnyRowLimit`` rows.
    package static func needed(for weights: ModelWeights, maxBatch: Int) -> HalfScratch? {
        let c = weights.config
        let half = c.weightPrecision == .f16 && maxBatch >= Kernels.halfConversionRows
        let packed = weights.hasPackedWeights && maxBatch > Kernels.skinnyRowLimit
        return half || packed ? HalfScratch(width: max(c.dim, c.hiddenDim)) : nil
    }

    /// The block of worker `worker` (`0..<Kernels.workerCount`: a thread of a parallel region, or
    /// a band when fewer threads run them one after another): never used by two threads at once.
    func block(_ worker: Int) -> Matrix {
        blocks.rows(worker * Kernels.halfBlockRows ..< (worker + 1) * Kernels.halfBlockRows)
    }
}
