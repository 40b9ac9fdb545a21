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

    init(_ matrix: Matrix) { storage = .f32(matrix) }
    init(_ matrix: HalfMatrix) { storage = .f16(matrix) }

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

    /// The rows in `range`, all columns (same storage).
    public func rows(_ range: Range<Int>) -> WeightMatrix {
        switch storage {
        case let .f32(m): WeightMatrix(m.rows(range))
        case let .f16(m): WeightMatrix(m.rows(range))
        }
    }

    /// Row `index` as a 1 × cols view.
    public func row(_ index: Int) -> WeightMatrix { rows(index ..< index + 1) }

    /// The float32 value of element (`row`, `col`).
    public subscript(row: Int, col: Int) -> Float {
        switch storage {
        case let .f32(m): m[row, col]
        case let .f16(m): kv_half_to_float(m[row, col])
        }
    }

    /// The elements' float32 values row by row, as a new array.
    public func toArray() -> [Float] {
        switch storage {
        case let .f32(m): return m.toArray()
        case let .f16(m):
            var out = [Float](repeating: 0, count: m.rows * m.cols)
            out.withUnsafeMutableBufferPointer { dst in
                for r in 0 ..< m.rows {
                    kv_halfs_to_floats(dst.baseAddress! + r * m.cols, m.base + r * m.rowStride, m.cols)
                }
            }
            return out
        }
    }

    /// The float32 matrix itself (no copy), for code that writes weights while loading them.
    /// - Precondition: the storage is float32 (loaders build float32 weights; see
    ///   ``ModelWeights/converted(to:memoryLimit:)``).
    package var floats: Matrix {
        guard case let .f32(m) = storage else { preconditionFailure("half-precision weights are read-only") }
        return m
    }

    /// A new dense half-precision matrix holding `matrix` rounded to nearest (benchmarks and tests).
    package static func half(copying matrix: Matrix) -> WeightMatrix {
        let buffer = try! HalfBuffer(checkedCount: matrix.rows * matrix.cols)   // sizes from a matrix that exists
        let out = WeightMatrix(HalfMatrix(buffer: buffer, offset: 0, rows: matrix.rows, cols: matrix.cols))
        Kernels.convert(WeightMatrix(matrix), into: out)
        return out
    }

    /// The values as a float32 matrix: the view itself for float32 storage, a new dense copy for half.
    package func floatMatrix() -> Matrix {
        switch storage {
        case let .f32(m): return m
        case let .f16(m):
            let out = Matrix.zeros(rows: m.rows, cols: m.cols)
            for r in 0 ..< m.rows { kv_halfs_to_floats(out.base + r * out.rowStride, m.base + r * m.rowStride, m.cols) }
            return out
        }
    }
}
