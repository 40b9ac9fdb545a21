import CKernels

/// A weight matrix `[rows, cols]` (rows = outputs) in the precision its model keeps
/// (``WeightPrecision``): the operand the projection kernels stream.
///
/// A view, like ``Matrix``: row ranges share the storage. Reading an element gives its float32
/// value (a half converts exactly), so code above the kernels never sees the storage type.
public struct WeightMatrix: Sendable {
    enum Storage: Sendable {
        case f32(Matrix)
        case f16(HalfMatrix)
    }

    let storage: Storage

    /// Whether the rows are packed for streaming (``Kernels/pack(_:)``): in groups of
    /// ``packGroup``, interleaved by eight-element chunks, so the kernels read each group as one
    /// contiguous run. Packed views start and end on a group boundary and are dense (row stride == cols).
    let packed: Bool

    /// Whether half-precision storage is known to hold no infinity or NaN (``checkingFiniteHalfs()``),
    /// which lets a decode step take the kernels' integer-converting tile
    /// (`kv_skinny_gemm_f16_packed_finite`). False for float32 storage and until checked.
    let finiteHalfs: Bool

    init(_ matrix: Matrix, packed: Bool = false) { storage = .f32(matrix); self.packed = packed; finiteHalfs = false }
    init(_ matrix: HalfMatrix, packed: Bool = false, finiteHalfs: Bool = false) {
        storage = .f16(matrix)
        self.packed = packed
        self.finiteHalfs = finiteHalfs
    }

    /// The same view, its half-precision elements scanned once for infinities and NaNs
    /// (``finiteHalfs``). Loaders call it once the values are final; float32 storage is returned as is.
    func checkingFiniteHalfs() -> WeightMatrix {
        guard case let .f16(m) = storage else { return self }
        let finite = (0 ..< m.rows).allSatisfy { kv_count_nonfinite_halfs(m.base + $0 * m.rowStride, m.cols) == 0 }
        return WeightMatrix(m, packed: packed, finiteHalfs: finite)
    }

    /// Rows per packing group.
    static let packGroup = kv_pack_group()

    /// Whether a matrix of this shape can be packed: whole groups of rows, stored densely.
    var isPackable: Bool {
        guard !packed, rows > 0, rows % Self.packGroup == 0 else { return false }
        switch storage { case let .f32(m): return m.rowStride == m.cols; case let .f16(m): return m.rowStride == m.cols }
    }

    /// The same storage read as `packed` or plain rows, data untouched (for zeroed storage,
    /// which reads the same either way).
    func relabeled(packed: Bool) -> WeightMatrix {
        switch storage { case let .f32(m): WeightMatrix(m, packed: packed); case let .f16(m): WeightMatrix(m, packed: packed) }
    }

    /// Where element (`row`, `col`) lives, as an offset from element (0, 0).
    private func offset(_ row: Int, _ col: Int, rowStride: Int) -> Int {
        packed ? kv_packed_index(row, col, cols) : row * rowStride + col
    }

    /// Row count (outputs).
    public var rows: Int {
        switch storage { case let .f32(m): m.rows; case let .f16(m): m.rows }
    }

    /// Column count (inputs).
    public var cols: Int {
        switch storage { case let .f32(m): m.cols; case let .f16(m): m.cols }
    }

    /// How the elements are stored.
    public var precision: WeightPrecision {
        switch storage { case .f32: .f32; case .f16: .f16 }
    }

    /// The rows in `range`, all columns (same storage). On packed rows the range must start and
    /// end on a group boundary (``packGroup``).
    public func rows(_ range: Range<Int>) -> WeightMatrix {
        precondition(!packed || (range.lowerBound % Self.packGroup == 0 && range.count % Self.packGroup == 0),
                     "a packed weight matrix splits only between groups of \(Self.packGroup) rows")
        switch storage {
        case let .f32(m): return WeightMatrix(m.rows(range), packed: packed)
        case let .f16(m): return WeightMatrix(m.rows(range), packed: packed, finiteHalfs: finiteHalfs)
        }
    }

    /// Row `index` as a 1 × cols view (plain rows only; use the subscript on packed ones).
    public func row(_ index: Int) -> WeightMatrix { rows(index ..< index + 1) }

    /// The float32 value of element (`row`, `col`).
    public subscript(row: Int, col: Int) -> Float {
        precondition(row >= 0 && row < rows && col >= 0 && col < cols, "index out of bounds")
        switch storage {
        case let .f32(m): return m.base[offset(row, col, rowStride: m.rowStride)]
        case let .f16(m): return kv_half_to_float(m.base[offset(row, col, rowStride: m.rowStride)])
        }
    }

    /// The elements' float32 values row by row, as a new array.
    public func toArray() -> [Float] {
        var out = [Float](repeating: 0, count: rows * cols)
        out.withUnsafeMutableBufferPointer { dst in
            if let dst = dst.baseAddress { Kernels.unpack(self, rows: 0 ..< rows, into: dst, rowStride: cols) }
        }
        return out
    }

    /// The float32 matrix itself (no copy), for code that writes weights while loading them.
    /// - Precondition: the storage is float32 with plain rows (loaders build float32 weights and
    ///   pack them last; see ``ModelWeights/converted(to:memoryLimit:)``).
    package var floats: Matrix {
        guard case let .f32(m) = storage, !packed else { preconditionFailure("half-precision and packed weights are read-only") }
        return m
    }

    /// A new dense half-precision matrix holding `matrix` rounded to nearest (benchmarks and tests).
    package static func half(copying matrix: Matrix) -> WeightMatrix {
        let buffer = try! HalfBuffer(checkedCount: matrix.rows * matrix.cols)   // sizes from a matrix that exists
        let out = WeightMatrix(HalfMatrix(buffer: buffer, offset: 0, rows: matrix.rows, cols: matrix.cols))
        Kernels.convert(WeightMatrix(matrix), into: out)
        return out
    }

    /// The values as a float32 matrix with plain rows: the view itself for plain float32 storage,
    /// a new dense copy otherwise.
    package func floatMatrix() -> Matrix {
        if case let .f32(m) = storage, !packed { return m }
        let out = Matrix.zeros(rows: rows, cols: cols)
        Kernels.unpack(self, rows: 0 ..< rows, into: out.base, rowStride: out.rowStride)
        return out
    }
}
