import Foundation
/// Fixed-size float32 storage, allocated once, zero-filled (unless made for rows that are
/// written before they are read), and freed with the object.
///
/// Every tensor in the runtime (weights, activations, K/V rows) lives in a
/// `FloatBuffer` and is addressed through ``Matrix`` views, so code above
/// `Kernels` never handles raw pointers. The buffer is `Sendable` because its
/// size never changes; callers that share one between tasks must not write to
/// it concurrently (weights are written once, at load).
public final class FloatBuffer: @unchecked Sendable {
    let base: UnsafeMutablePointer<Float>
    /// Number of floats held.
    public let count: Int

    /// Allocates `count` zeroed floats; traps if the system refuses (use
    /// ``init(checkedCount:)`` where the size comes from input).
    /// - Parameter count: number of float32 elements; must not be negative.
    public convenience init(count: Int) {
        do { try self.init(checkedCount: count) } catch {
            preconditionFailure("\(error)")
        }
    }

    /// Allocates `count` zeroed floats, or throws when the system refuses.
    /// - Parameter count: number of float32 elements.
    /// - Throws: ``RuntimeError/allocationFailed(bytes:)`` for a negative or impossible size, or
    ///   when the allocation fails; nothing is allocated then.
    public convenience init(checkedCount count: Int) throws {
        try self.init(uninitializedCount: count)
        let base = base
        // First touch of fresh memory is most of a large allocation's cost (page faults), and
        // the kernel takes them on every core at once: a session's 75 MB cache for a restored
        // 3,000-token conversation on `base` zero-fills in 22-72 ms instead of 46-144 ms.
        Kernels.parallelBands(max(count, 1), minimumPerBand: 1 << 20) { band in
            (base + band.lowerBound).initialize(repeating: 0, count: band.count)
        }
    }

    /// Allocates `count` floats whose values are unspecified until written: for storage whose
    /// every element is written before it is read (a K/V cache's rows beyond its count), so
    /// the first writes take the page faults instead of a zero fill ahead of them.
    /// - Throws: ``RuntimeError/allocationFailed(bytes:)`` as ``init(checkedCount:)``.
    package init(uninitializedCount count: Int) throws {
        let (bytes, overflow) = max(count, 1).multipliedReportingOverflow(by: MemoryLayout<Float>.stride)
        guard count >= 0, !overflow else { throw RuntimeError.allocationFailed(bytes: .max) }
        if bytes >= LargeMapping.threshold {   // streamed storage: huge pages where offered
            guard let mapping = LargeMapping.map(bytes) else { throw RuntimeError.allocationFailed(bytes: bytes) }
            base = mapping.base.bindMemory(to: Float.self, capacity: count)
            mappedByteCount = mapping.length
        } else {
            guard let raw = LargeMapping.alignedAllocation(bytes) else { throw RuntimeError.allocationFailed(bytes: bytes) }
            base = raw.bindMemory(to: Float.self, capacity: max(count, 1))
            mappedByteCount = 0
        }
        self.count = count
    }

    /// Allocates `count` floats, unspecified until written, as a private page-aligned mapping of
    /// their own: whole pages of it can later be replaced by pages of a file
    /// (``Kernels/mapFilePages(_:at:over:)``), copy-on-write, so
    /// rows restored from disk are not copied. A K/V cache's storage.
    /// - Throws: ``RuntimeError/allocationFailed(bytes:)`` as ``init(checkedCount:)``.
    package init(pageMappedCount count: Int) throws {
        let page = Kernels.pageSize
        let (bytes, overflow) = max(count, 1).multipliedReportingOverflow(by: MemoryLayout<Float>.stride)
        guard count >= 0, !overflow, bytes <= Int.max - page else {
            throw RuntimeError.allocationFailed(bytes: .max)
        }
        let rounded = (bytes + page - 1) / page * page
        let raw = mmap(nil, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let raw, raw != MAP_FAILED else { throw RuntimeError.allocationFailed(bytes: rounded) }
        base = raw.bindMemory(to: Float.self, capacity: max(count, 1))
        self.count = count
        mappedByteCount = rounded
    }

    deinit {
        if mappedByteCount > 0 { munmap(base, mappedByteCount) } else { free(base) }
    }

    /// Bytes of the buffer's own mapping (``init(pageMappedCount:)``, or a ``LargeMapping`` for
    /// large buffers); 0 for malloc'd storage.
    let mappedByteCount: Int

    /// Reads or writes one element.
    public subscript(index: Int) -> Float {
        get { precondition(index >= 0 && index < count); return base[index] }
        set { precondition(index >= 0 && index < count); base[index] = newValue }
    }

    /// Size in bytes.
    public var byteCount: Int { count * MemoryLayout<Float>.stride }
}

/// A row-major view of `rows × cols` floats inside a ``FloatBuffer``.
///
/// Row `r` starts at `offset + r * rowStride`; `rowStride >= cols` lets a view
/// select a block of columns (one attention head) out of a wider matrix.
public struct Matrix: Sendable {
    /// The storage the view reads and writes.
    public let buffer: FloatBuffer
    /// Index of element (0, 0) in `buffer`.
    public let offset: Int
    /// Row count.
    public let rows: Int
    /// Column count.
    public let cols: Int
    /// Distance in floats between the starts of consecutive rows.
    public let rowStride: Int

    /// A view over `buffer`.
    /// - Parameters:
    ///   - buffer: the storage; the view must fit inside it.
    ///   - offset: index of element (0, 0).
    ///   - rows: row count.
    ///   - cols: column count.
    ///   - rowStride: floats between row starts; defaults to `cols` (dense).
    public init(buffer: FloatBuffer, offset: Int = 0, rows: Int, cols: Int, rowStride: Int? = nil) {
        let stride = rowStride ?? cols
        precondition(rows >= 0 && cols >= 0 && stride >= cols && offset >= 0, "invalid Matrix shape")
        precondition(rows == 0 || offset + (rows - 1) * stride + cols <= buffer.count, "Matrix exceeds its buffer")
        self.buffer = buffer
        self.offset = offset
        self.rows = rows
        self.cols = cols
        self.rowStride = stride
    }

    /// A new zeroed dense matrix with its own buffer.
    public static func zeros(rows: Int, cols: Int) -> Matrix {
        Matrix(buffer: FloatBuffer(count: rows * cols), rows: rows, cols: cols)
    }

    /// A new dense matrix holding `values` row by row.
    /// - Precondition: `values.count == rows * cols`.
    public init(rows: Int, cols: Int, values: [Float]) {
        precondition(values.count == rows * cols, "values do not match the shape")
        self = .zeros(rows: rows, cols: cols)
        for (i, v) in values.enumerated() { buffer[i] = v }
    }

    /// The rows in `range`, all columns.
    public func rows(_ range: Range<Int>) -> Matrix {
        precondition(range.lowerBound >= 0 && range.upperBound <= rows, "row range out of bounds")
        return Matrix(buffer: buffer, offset: offset + range.lowerBound * rowStride,
                      rows: range.count, cols: cols, rowStride: rowStride)
    }

    /// The columns in `range`, all rows.
    public func columns(_ range: Range<Int>) -> Matrix {
        precondition(range.lowerBound >= 0 && range.upperBound <= cols, "column range out of bounds")
        return Matrix(buffer: buffer, offset: offset + range.lowerBound,
                      rows: rows, cols: range.count, rowStride: rowStride)
    }

    /// Row `index` as a 1 × cols view.
    public func row(_ index: Int) -> Matrix { rows(index ..< index + 1) }

    /// Reads or writes element (`row`, `col`).
    public subscript(row: Int, col: Int) -> Float {
        get { buffer[offset + row * rowStride + col] }
        nonmutating set { buffer[offset + row * rowStride + col] = newValue }
    }

    /// The elements row by row, as a new array.
    public func toArray() -> [Float] {
        var out: [Float] = []
        out.reserveCapacity(rows * cols)
        for r in 0 ..< rows { for c in 0 ..< cols { out.append(self[r, c]) } }
        return out
    }

    /// Pointer to element (0, 0); kernels only.
    var base: UnsafeMutablePointer<Float> { buffer.base + offset }
}
