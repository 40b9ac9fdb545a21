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

    /// Backs the whole pages of dense `matrix` with the file `descriptor`, whose little-endian
    /// floats for the matrix start at `offset`: a private, copy-on-write mapping (writes never
    /// reach the file, which is open read-only anyway). Returns the floats of the matrix now
    /// mapped, to pass to ``readLittleEndianFloats(_:at:into:checksum:mapped:)``, which still
    /// checks them; empty unless the matrix lies in a page-mapped buffer
    /// (``FloatBuffer/init(pageMappedCount:)``), the host is little-endian, `offset` agrees with
    /// the matrix's address modulo the page size and a whole page lies inside.
    ///
    /// Mapping page-cache pages costs a fraction of filling fresh memory with them (72 MB of K/V:
    /// about 9 ms to map and touch against 20-35 ms to fill on a 2-vCPU VM). Mapping changes the
    /// process's address space, so callers map everything first and read in parallel after.
    /// - Important: a mapped file must not be truncated while the buffer lives (reading a page
    ///   past its end raises SIGBUS); the prefix store's files are replaced by rename or removed,
    ///   never truncated in place.
    package static func mapFilePages(_ descriptor: Int32, at offset: Int, over matrix: Matrix) -> Range<Int> {
        #if _endian(little)
        guard mapsFilePages, matrix.buffer.mappedByteCount > 0, matrix.rowStride == matrix.cols || matrix.rows == 1 else { return 0 ..< 0 }
        let page = pageSize, address = Int(bitPattern: matrix.base), bytes = 4 * matrix.rows * matrix.cols
        let head = (page - address % page) % page
        guard (address - offset) % page == 0, bytes - head >= page else { return 0 ..< 0 }
        let start = UnsafeMutableRawPointer(matrix.base) + head, length = (bytes - head) / page * page
        let mapped = mmap(start, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, descriptor, off_t(offset + head))
        guard mapped != start else { return head / 4 ..< (head + length) / 4 }
        // A failed fixed mapping may have unmapped the range: put fresh anonymous pages back.
        let restored = mmap(start, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0)
        precondition(restored == start, "cannot restore anonymous pages after a failed file mapping (errno \(errno))")
        #endif
        return 0 ..< 0
    }

    /// Whether ``mapFilePages(_:at:over:)`` maps at all (`KVSESSION_MAP_FILES=0` turns it off, for
    /// measuring a restore that reads everything against one that maps).
    package static let mapsFilePages = ProcessInfo.processInfo.environment["KVSESSION_MAP_FILES"] != "0"

    /// Reads `matrix.rows * matrix.cols` little-endian float32 values from the file `descriptor`
    /// at `offset` into `matrix`, updating `checksum` over every byte in file order, except that
    /// the floats in `mapped` (from ``mapFilePages(_:at:over:)`` with the same file and offset)
    /// are already the file's and are only checksummed, through the mapping. Returns the offset
    /// after the last value. Reads go in pieces small enough to stay in cache while the checksum
    /// is updated.
    /// - Throws: ``FileReadError`` when the file ends early or a read fails; `matrix` then
    ///   holds unspecified values.
    package static func readLittleEndianFloats(_ descriptor: Int32, at offset: Int, into matrix: Matrix,
                                               checksum: inout kv_checksum_state, mapped: Range<Int> = 0 ..< 0) throws -> Int {
        guard matrix.rowStride == matrix.cols || matrix.rows == 1 else {
            precondition(mapped.isEmpty, "only dense matrices are mapped")
            var position = offset
            for r in 0 ..< matrix.rows {
                position = try readFloats(descriptor, at: position, into: matrix.base + r * matrix.rowStride,
                                          count: matrix.cols, checksum: &checksum)
            }
            return position
        }
        let base = matrix.base, count = matrix.rows * matrix.cols
        precondition(mapped.isEmpty || (mapped.lowerBound >= 0 && mapped.upperBound <= count), "mapped floats outside the matrix")
        let kept = mapped.isEmpty ? count ..< count : mapped
        var position = try readFloats(descriptor, at: offset, into: base, count: kept.lowerBound, checksum: &checksum)
        kv_checksum64_update(&checksum, base + kept.lowerBound, 4 * kept.count)
        position += 4 * kept.count
        return try readFloats(descriptor, at: position, into: base + kept.upperBound, count: count - kept.upperBound,
                              checksum: &checksum)
    }

    /// Updates `checksum` over `count` bytes of the file at `offset` (bytes that are checked but not kept).
    /// Returns the offset after them.
    /// - Throws: ``FileReadError`` as ``readLittleEndianFloats(_:at:into:checksum:mapped:)``.
    package static func hashFileBytes(_ descriptor: Int32, at offset: Int, count: Int,
                                      checksum: inout kv_checksum_state) throws -> Int {
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: min(max(count, 1), readPieceBytes), alignment: 64)
        defer { scratch.deallocate() }
        var position = offset
        while position < offset + count {
            let n = try readPiece(descriptor, at: position, into: scratch, byteCount: min(offset + count - position, readPieceBytes))
            kv_checksum64_update(&checksum, scratch, n)
            position += n
        }
        return position
    }

    /// Size of a virtual-memory page.
    package static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Reads `count` little-endian floats of the file at `offset` into `floats`, updating `checksum`.
    private static func readFloats(_ descriptor: Int32, at offset: Int, into floats: UnsafeMutablePointer<Float>,
                                   count: Int, checksum: inout kv_checksum_state) throws -> Int {
        let raw = UnsafeMutableRawPointer(floats)
        var done = 0
        while done < 4 * count {
            let n = try readPiece(descriptor, at: offset + done, into: raw + done, byteCount: min(4 * count - done, readPieceBytes))
            kv_checksum64_update(&checksum, raw + done, n)
            done += n
        }
        #if _endian(big)
        let values = raw.assumingMemoryBound(to: UInt32.self)
        for i in 0 ..< count { values[i] = UInt32(littleEndian: values[i]) }
        #endif
        return offset + done
    }

    /// One `pread` of at most `byteCount` bytes (retried on EINTR); the bytes it read.
    private static func readPiece(_ descriptor: Int32, at offset: Int, into raw: UnsafeMutableRawPointer, byteCount: Int) throws -> Int {
        while true {
            let n = pread(descriptor, raw, byteCount, off_t(offset))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                throw FileReadError(description: n == 0 ? "the file ends early" : "read failed (errno \(errno))")
            }
            return n
        }
    }

    /// Why ``readLittleEndianFloats(_:at:into:checksum:mapped:)`` stopped.
    package struct FileReadError: Error, CustomStringConvertible {
        package let description: String
    }

    /// Bytes per read in ``readLittleEndianFloats(_:at:into:checksum:mapped:)``: a quarter of a typical L2.
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
