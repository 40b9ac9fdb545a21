import CKernels
import Foundation

extension Kernels {
    /// Fills `matrix` with values uniform in `[-scale, scale)` from a ``SeededGenerator``.
    ///
    /// Values come from the top 24 bits of each 64-bit draw, so the result is
    /// identical on every machine and run.
    package static func fillUniform(_ matrix: Matrix, seed: UInt64, scale: Float) {
        var rng = SeededGenerator(seed: seed)
        for r in 0 ..< matrix.rows {
            let row = matrix.base + r * matrix.rowStride
            for c in 0 ..< matrix.cols { row[c] = (rng.nextUnitFloat() * 2 - 1) * scale }
        }
    }

    /// Fills `matrix` with one value.
    package static func fill(_ matrix: Matrix, with value: Float) {
        for r in 0 ..< matrix.rows { (matrix.base + r * matrix.rowStride).update(repeating: value, count: matrix.cols) }
    }

    /// Copies `matrix.rows * matrix.cols` little-endian float32 values out of
    /// `data`, starting at `byteOffset`, row by row into `matrix`.
    /// - Precondition: the bytes are inside `data` (callers check and throw first).
    package static func loadLittleEndianFloats(from data: Data, byteOffset: Int, into matrix: Matrix) {
        let count = matrix.rows * matrix.cols
        precondition(byteOffset >= 0 && byteOffset + count * 4 <= data.count, "float range outside the data")
        data.withUnsafeBytes { raw in
            let start = raw.baseAddress! + byteOffset
            for r in 0 ..< matrix.rows {
                let dst = matrix.base + r * matrix.rowStride
                let src = start + r * matrix.cols * 4
                #if _endian(little)
                UnsafeMutableRawPointer(dst).copyMemory(from: src, byteCount: matrix.cols * 4)   // the file's bytes are ours
                #else
                for c in 0 ..< matrix.cols {
                    dst[c] = Float(bitPattern: UInt32(littleEndian: (src + c * 4).loadUnaligned(as: UInt32.self)))
                }
                #endif
            }
        }
    }

    /// Reads `matrix.rows * matrix.cols` little-endian float32 values from the file `descriptor`
    /// at `offset` straight into `matrix`, in pieces small enough to stay in cache while
    /// `checksum` is updated over each piece's bytes. Returns the offset after the last value.
    /// - Throws: ``FileReadError`` when the file ends early or a read fails; `matrix` then
    ///   holds unspecified values.
    package static func readLittleEndianFloats(_ descriptor: Int32, at offset: Int, into matrix: Matrix,
                                               checksum: inout kv_checksum_state) throws -> Int {
        let contiguous = matrix.rowStride == matrix.cols || matrix.rows == 1
        let runs = contiguous ? [(0, matrix.rows * matrix.cols)] : (0 ..< matrix.rows).map { ($0 * matrix.rowStride, matrix.cols) }
        var position = offset
        for (start, floats) in runs {
            let run = UnsafeMutableRawPointer(matrix.base + start)
            var done = 0
            while done < 4 * floats {
                let piece = min(4 * floats - done, readPieceBytes)
                let n = pread(descriptor, run + done, piece, off_t(position))
                if n < 0, errno == EINTR { continue }
                guard n > 0 else {
                    throw FileReadError(description: n == 0 ? "the file ends early" : "read failed (errno \(errno))")
                }
                kv_checksum64_update(&checksum, run + done, n)
                done += n
                position += n
            }
            #if _endian(big)
            let values = run.assumingMemoryBound(to: UInt32.self)
            for i in 0 ..< floats { values[i] = UInt32(littleEndian: values[i]) }
            #endif
        }
        return position
    }

    /// Why ``readLittleEndianFloats(_:at:into:checksum:)`` stopped.
    package struct FileReadError: Error, CustomStringConvertible {
        package let description: String
    }

    /// Bytes per read in ``readLittleEndianFloats(_:at:into:checksum:)``: a quarter of a typical L2.
    static let readPieceBytes = 128 << 10

    /// The 64-bit checksum of `data[range]` (``kv_checksum64``: fast, detects corruption, not a MAC).
    package static func checksum(_ data: Data, _ range: Range<Int>) -> UInt64 {
        precondition(range.lowerBound >= 0 && range.upperBound <= data.count, "checksum range outside the data")
        return data.withUnsafeBytes { raw in kv_checksum64(raw.baseAddress! + range.lowerBound, range.count) }
    }
}

extension Kernels {
    /// Appends the elements of `matrix`, row by row, to `data` as little-endian float32.
    package static func appendLittleEndianFloats(_ matrix: Matrix, to data: inout Data) {
        data.reserveCapacity(data.count + 4 * matrix.rows * matrix.cols)
        for r in 0 ..< matrix.rows {
            let row = UnsafeBufferPointer(start: matrix.base + r * matrix.rowStride, count: matrix.cols)
            #if _endian(little)
            data.append(row)   // the in-memory bytes are the file's
            #else
            for value in row { withUnsafeBytes(of: value.bitPattern.littleEndian) { data.append(contentsOf: $0) } }
            #endif
        }
    }
}
