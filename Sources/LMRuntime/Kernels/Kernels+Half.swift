import CKernels
import Foundation

extension Kernels {
    /// The float32 value of IEEE half-precision `bits` (exact: every half is a float).
    package static func float(fromHalf bits: UInt16) -> Float {
        let sign = UInt32(bits & 0x8000) << 16
        let exponent = UInt32(bits >> 10) & 0x1F, mantissa = UInt32(bits & 0x3FF)
        switch exponent {
        case 0:   // zero or subnormal: mantissa · 2⁻²⁴
            let magnitude = Float(mantissa) * 0x1p-24
            return sign == 0 ? magnitude : -magnitude
        case 0x1F: return Float(bitPattern: sign | 0x7F80_0000 | mantissa << 13)   // infinity or NaN
        default: return Float(bitPattern: sign | (exponent + 112) << 23 | mantissa << 13)
        }
    }

    /// `value` rounded to the nearest IEEE half (ties to even); overflow gives infinity.
    package static func halfBits(_ value: Float) -> UInt16 {
        let x = value.bitPattern
        let sign = UInt16(truncatingIfNeeded: x >> 16) & 0x8000
        let exponent = Int((x >> 23) & 0xFF), mantissa = x & 0x7F_FFFF
        if exponent == 0xFF { return sign | 0x7C00 | (mantissa == 0 ? 0 : 0x200 | UInt16(mantissa >> 13)) }
        let e = exponent - 112                      // the half's biased exponent
        if e >= 31 { return sign | 0x7C00 }
        // Normal: the top 10 mantissa bits, 13 dropped. Subnormal: the whole significand shifted
        // further right. Either way round the dropped bits to nearest, ties to even; a carry
        // ripples into the exponent, which is the right encoding (up to infinity).
        let (kept, shift): (UInt32, UInt32) = e > 0 ? (UInt32(e) << 23 | mantissa, 13) : (mantissa | 0x80_0000, UInt32(14 - e))
        if shift > 24 { return sign }
        var h = kept >> shift
        let rest = kept & ((1 << shift) - 1), half = UInt32(1) << (shift - 1)
        if rest > half || (rest == half && h & 1 == 1) { h += 1 }
        return sign | UInt16(h)
    }

    /// The smallest magnitude that rounds to an infinite half: the largest finite half, 65,504,
    /// plus half its last step of 32 (a tie, which goes to the even neighbour, infinity).
    package static let halfOverflowMagnitude: Float = 65520

    /// The finite float32 elements of `matrix` that would round to an infinite half (magnitude
    /// ``halfOverflowMagnitude`` or more): how many, and the largest magnitude among them.
    /// Infinities and NaNs are not counted (they convert to themselves); half storage has none.
    package static func halfOverflow(_ matrix: WeightMatrix) -> (count: Int, largest: Float) {
        guard case let .f32(m) = matrix.storage else { return (0, 0) }
        var count = 0, largest: Float = 0
        for r in 0 ..< m.rows {   // a packed view is dense, so its rows of storage hold its elements
            for x in UnsafeBufferPointer(start: m.base + r * m.rowStride, count: m.cols)
            where x.magnitude >= halfOverflowMagnitude && x.isFinite {
                count += 1
                largest = max(largest, x.magnitude)
            }
        }
        return (count, largest)
    }

    /// The Q8_0 blocks of `matrix` (whole blocks of 32 a row) whose largest finite magnitude is
    /// 8,321,040 (65,520 × 127) or more, so that the scale ``appendQ8_0(_:to:)`` writes for them
    /// (that magnitude over 127, rounded to a half) is infinite and all 32 weights read back
    /// infinite or NaN: how many, and the largest of those magnitudes. Infinities and NaNs are
    /// passed over, wherever in the block they are.
    package static func q8_0ScaleOverflow(_ matrix: Matrix) -> (count: Int, largest: Float) {
        precondition(matrix.cols % 32 == 0, "Q8_0 rows are whole blocks")
        var count = 0, largest: Float = 0
        for r in 0 ..< matrix.rows {
            let row = UnsafeBufferPointer(start: matrix.base + r * matrix.rowStride, count: matrix.cols)
            for block in stride(from: 0, to: matrix.cols, by: 32) {
                let magnitude = row[block ..< block + 32].reduce(Float(0)) { $1.isFinite ? max($0, $1.magnitude) : $0 }
                guard magnitude / 127 >= halfOverflowMagnitude else { continue }
                count += 1
                largest = max(largest, magnitude)
            }
        }
        return (count, largest)
    }

    /// Reads `matrix.rows × matrix.cols` little-endian halfs at `byteOffset` into `matrix`.
    package static func loadHalfs(from data: Data, byteOffset: Int, into matrix: Matrix) {
        precondition(byteOffset >= 0 && byteOffset + 2 * matrix.rows * matrix.cols <= data.count, "half range outside the data")
        data.withUnsafeBytes { raw in
            var src = raw.baseAddress! + byteOffset
            for r in 0 ..< matrix.rows {
                let dst = matrix.base + r * matrix.rowStride
                for c in 0 ..< matrix.cols {
                    dst[c] = float(fromHalf: UInt16(littleEndian: src.loadUnaligned(as: UInt16.self)))
                    src += 2
                }
            }
        }
    }

    /// Reads GGML Q8_0 blocks (a half scale, then 32 signed bytes) at `byteOffset` into `matrix`,
    /// whose column count is a multiple of 32.
    package static func loadQ8_0(from data: Data, byteOffset: Int, into matrix: Matrix) {
        precondition(matrix.cols % 32 == 0, "Q8_0 rows are whole blocks")
        precondition(byteOffset >= 0 && byteOffset + matrix.rows * matrix.cols / 32 * 34 <= data.count, "Q8_0 range outside the data")
        data.withUnsafeBytes { raw in
            var src = raw.baseAddress! + byteOffset
            for r in 0 ..< matrix.rows {
                let dst = matrix.base + r * matrix.rowStride
                for block in stride(from: 0, to: matrix.cols, by: 32) {
                    let scale = float(fromHalf: UInt16(littleEndian: src.loadUnaligned(as: UInt16.self)))
                    for i in 0 ..< 32 { dst[block + i] = scale * Float(Int8(bitPattern: src.load(fromByteOffset: 2 + i, as: UInt8.self))) }
                    src += 34
                }
            }
        }
    }

    /// Appends `matrix` as little-endian halfs (rounded to nearest).
    package static func appendHalfs(_ matrix: Matrix, to data: inout Data) {
        data.reserveCapacity(data.count + 2 * matrix.rows * matrix.cols)
        for r in 0 ..< matrix.rows {
            for value in UnsafeBufferPointer(start: matrix.base + r * matrix.rowStride, count: matrix.cols) {
                withUnsafeBytes(of: halfBits(value).littleEndian) { data.append(contentsOf: $0) }
            }
        }
    }

    /// Appends `matrix` as GGML Q8_0 blocks: per 32 weights, `d = max|x| / 127` as a half and
    /// `q = round(x / d)`. The column count must be a multiple of 32. A block holding an infinity
    /// or NaN is written with that scale (NaN when there is a NaN) and every `q` zero, so all its
    /// weights read back NaN, whatever order they are in.
    package static func appendQ8_0(_ matrix: Matrix, to data: inout Data) {
        precondition(matrix.cols % 32 == 0, "Q8_0 rows are whole blocks")
        for r in 0 ..< matrix.rows {
            let row = UnsafeBufferPointer(start: matrix.base + r * matrix.rowStride, count: matrix.cols)
            for block in stride(from: 0, to: matrix.cols, by: 32) {
                let values = row[block ..< block + 32]
                let largest = values.contains(where: \.isNaN) ? .nan : values.reduce(Float(0)) { max($0, $1.magnitude) }
                let scale = largest / 127
                withUnsafeBytes(of: halfBits(scale).littleEndian) { data.append(contentsOf: $0) }
                guard largest.isFinite else { data.append(contentsOf: repeatElement(0, count: 32)); continue }
                let inverse: Float = scale == 0 ? 0 : 1 / scale
                for v in values { data.append(UInt8(bitPattern: Int8(max(-127, min(127, (v * inverse).rounded()))))) }
            }
        }
    }
}

extension Kernels {
    /// Rows of half (or packed) weights a long pass converts to plain float32 at a time before
    /// handing them to sgemm, for the model's widest matrix: a block of `[halfBlockRows, cols]`
    /// floats stays in L2 while sgemm packs it (narrower matrices take as many floats in more rows).
    /// 128; 384 on Intel's Emerald Rapids (2 MiB of L2), where each sgemm call also packs
    /// all the activations again, so wider blocks pay that less often: a prefill of 512 / 2,048
    /// tokens on `base` went from 1,053–1,132 / 969–1,014 to 1,157–1,181 / 1,039–1,056 tokens/s
    /// with 256 rows (f32, alternating binaries; with plain rows, nothing to unpack, 1,232–1,299 at
    /// 512); 384 rows, a whole band of `base`'s down projection on two threads (one call, one
    /// packing of its 2,816-column activations, instead of two), took f16 prefill of 512 tokens
    /// from 0.66–0.85 to 0.73–0.89 of its GEMMs' sgemm, median 0.77 to 0.83, better in 7 of 9
    /// alternating rounds (1,024 rows was worse). `KVSESSION_HALF_BLOCK_ROWS` overrides it.
    package static let halfBlockRows = ProcessInfo.processInfo.environment["KVSESSION_HALF_BLOCK_ROWS"].flatMap { Int($0) }
        .map { max(8, $0 / 8 * 8) } ?? (kv_intel_emerald_rapids() != 0 ? 384 : 128)

    /// Copies `source` into `destination` (same shape), converting between precisions: float32 to
    /// half rounds to nearest (ties to even), half to float32 is exact.
    package static func convert(_ source: WeightMatrix, into destination: WeightMatrix) {
        precondition(source.rows == destination.rows && source.cols == destination.cols, "convert shape mismatch")
        // Packed matrices are dense and packing depends on the shape only, so two packed matrices
        // of one shape hold each element at the same offset: row r's offsets r*cols ..< (r+1)*cols
        // convert position by position like plain rows.
        precondition(source.packed == destination.packed, "convert between layouts")
        parallelBands(source.rows, minimumPerBand: 64) { rows in
            for r in rows {
                switch (source.storage, destination.storage) {
                case let (.f32(a), .f32(b)):
                    (b.base + r * b.rowStride).update(from: a.base + r * a.rowStride, count: a.cols)
                case let (.f16(a), .f16(b)):
                    (b.base + r * b.rowStride).update(from: a.base + r * a.rowStride, count: a.cols)
                case let (.f16(a), .f32(b)):
                    kv_halfs_to_floats(b.base + r * b.rowStride, a.base + r * a.rowStride, a.cols)
                case let (.f32(a), .f16(b)):
                    let from = a.base + r * a.rowStride, to = b.base + r * b.rowStride
                    for c in 0 ..< a.cols { to[c] = halfBits(from[c]) }
                }
            }
        }
    }

    /// Copies rows `ids` of `table` into consecutive rows of `out` as float32 (the embedding lookup).
    package static func gatherRows(_ table: WeightMatrix, ids: ArraySlice<Int>, into out: Matrix) {
        precondition(!table.packed, "an embedding table keeps plain rows")
        switch table.storage {
        case let .f32(m): gatherRows(m, ids: ids, into: out)
        case let .f16(m):
            precondition(out.rows == ids.count && out.cols == m.cols, "gatherRows shape mismatch")
            for (r, id) in ids.enumerated() {
                precondition(id >= 0 && id < m.rows, "row id out of range")
                kv_halfs_to_floats(out.base + r * out.rowStride, m.base + id * m.rowStride, m.cols)
            }
        }
    }
}
