import Foundation

extension Tokenizer {
    /// Reads a llama2.c `tokenizer.bin`: `uint32 maxTokenLength`, then per entry
    /// `float32 score, uint32 length, length bytes` (little-endian).
    ///
    /// - Parameters:
    ///   - url: the file.
    ///   - vocabSize: entries to read (the format does not store the count; llama2.c
    ///     takes it from the model). `nil` reads entries until the end of the file.
    /// - Throws: ``ModelLoadError/corruptTokenizer(path:byteOffset:reason:)`` naming the
    ///   offset of the first bad field, or ``ModelLoadError/unreadable(path:reason:)``.
    public init(contentsOf url: URL, vocabSize: Int? = nil) throws {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw ModelLoadError.unreadable(path: url.path, reason: error.localizedDescription)
        }
        try self.init(serialized: data, vocabSize: vocabSize, path: url.path)
    }

    /// Parses the bytes of a `tokenizer.bin` (see ``init(contentsOf:vocabSize:)``).
    public init(serialized data: Data, vocabSize: Int? = nil, path: String = "<memory>") throws {
        let bytes = [UInt8](data)
        var offset = 0
        func fail(_ reason: String) -> ModelLoadError {
            .corruptTokenizer(path: path, byteOffset: offset, reason: reason)
        }
        func u32() throws -> UInt32 {
            guard offset + 4 <= bytes.count else { throw fail("file ends inside a 4-byte field") }
            defer { offset += 4 }
            return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8
                | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
        }
        let maxLength = Int(Int32(bitPattern: try u32()))
        guard maxLength > 0, maxLength <= 1 << 16 else {
            offset = 0
            throw fail("max token length \(maxLength) is not in 1...65536")
        }
        var pieces: [[UInt8]] = [], scores: [Float] = []
        while vocabSize.map({ pieces.count < $0 }) ?? (offset < bytes.count) {
            let entry = pieces.count
            let score = Float(bitPattern: try u32())
            guard score.isFinite else { offset -= 4; throw fail("entry \(entry) has a non-finite score") }
            let length = Int(Int32(bitPattern: try u32()))
            guard length >= 0, length <= maxLength else {
                offset -= 4
                throw fail("entry \(entry) has length \(length), outside 0...\(maxLength)")
            }
            guard offset + length <= bytes.count else { throw fail("file ends inside entry \(entry)") }
            pieces.append(Array(bytes[offset ..< offset + length]))
            scores.append(score)
            offset += length
        }
        guard pieces.count > Self.byteOffset + 255 else {
            throw fail("only \(pieces.count) entries; the special and byte-fallback tokens need \(Self.byteOffset + 256)")
        }
        self.init(pieces: pieces, scores: scores)
    }

    /// The tokenizer in `tokenizer.bin` format.
    ///
    /// Only llama2.c's layout survives the trip (``fitsTokenizerBin``): a byte-level vocabulary's merges
    /// are ranked by pair, and control tokens and byte pieces elsewhere than at ``byteOffset`` are read
    /// back as llama2.c's, which the format has no place to say otherwise (`kvbench convert` refuses
    /// to write either).
    public func serialized() -> Data {
        var data = Data()
        func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        u32(UInt32(max(1, maxTokenLength)))   // an upper bound on lengths; the format needs at least 1
        for (piece, score) in zip(pieces, scores) {
            u32(score.bitPattern)
            u32(UInt32(piece.count))
            data.append(contentsOf: piece)
        }
        return data
    }
}
