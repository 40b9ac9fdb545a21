import CKernels

extension Kernels {
    /// Packs `matrix` in place for streaming and returns the packed view of the same storage:
    /// rows in groups of ``WeightMatrix/packGroup`` (four), each group stored as its eight-element
    /// chunks with the group's rows side by side (see `kv_pack8_f32`). A tile of four rows then
    /// reads one contiguous run, and a decode step's tile of eight two runs, instead of one stream
    /// per row a row apart: decode on `base` read 0.97-0.98 of the read ceiling against 0.89-0.92
    /// on plain rows (Zen 1, 2 MiB pages). Every output of the projection kernels keeps its
    /// arithmetic, so results are the same bits either way.
    /// The view `matrix` must not be used afterwards (its rows now hold packed data).
    /// - Precondition: ``WeightMatrix/isPackable``.
    static func pack(_ matrix: WeightMatrix) -> WeightMatrix {
        precondition(matrix.isPackable, "only dense matrices of whole groups of rows pack")
        let groupElements = WeightMatrix.packGroup * matrix.cols, groups = matrix.rows / WeightMatrix.packGroup
        switch matrix.storage {
        case let .f32(m):
            let scratch = Matrix.zeros(rows: workerCount, cols: groupElements)
            parallelBands(groups, minimumPerBand: 16) { band, range in
                kv_pack8_f32(m.base + range.lowerBound * groupElements, range.count * WeightMatrix.packGroup, m.cols,
                             scratch.base + band * scratch.rowStride)
            }
            return WeightMatrix(m, packed: true)
        case let .f16(m):
            let scratch = UnsafeMutablePointer<UInt16>.allocate(capacity: workerCount * groupElements)
            defer { scratch.deallocate() }
            parallelBands(groups, minimumPerBand: 16) { band, range in
                kv_pack8_f16(m.base + range.lowerBound * groupElements, range.count * WeightMatrix.packGroup, m.cols,
                             scratch + band * groupElements)
            }
            return WeightMatrix(m, packed: true).checkingFiniteHalfs()
        }
    }

    /// Writes rows `rows` of `matrix` as plain float32 rows (`rowStride` apart) at `destination`,
    /// whatever its precision and layout.
    static func unpack(_ matrix: WeightMatrix, rows: Range<Int>, into destination: UnsafeMutablePointer<Float>,
                       rowStride: Int) {
        precondition(rows.lowerBound >= 0 && rows.upperBound <= matrix.rows && rowStride >= matrix.cols, "unpack out of bounds")
        switch (matrix.storage, matrix.packed) {
        case let (.f32(m), false):
            for r in rows {
                (destination + (r - rows.lowerBound) * rowStride).update(from: m.base + r * m.rowStride, count: m.cols)
            }
        case let (.f16(m), false):
            for r in rows {
                kv_halfs_to_floats(destination + (r - rows.lowerBound) * rowStride, m.base + r * m.rowStride, m.cols)
            }
        case let (.f32(m), true):
            kv_unpack8_f32(destination, rowStride, m.base, rows.lowerBound, rows.count, m.cols)
        case let (.f16(m), true):
            kv_unpack8_f16(destination, rowStride, m.base, rows.lowerBound, rows.count, m.cols)
        }
    }
}
