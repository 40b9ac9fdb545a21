import Foundation

/// A GGUF (version 3) file: its metadata and tensor directory, parsed and checked; tensor data
/// stays in ``data`` until a loader decodes it.
///
/// Layout (little-endian): `"GGUF"`, `uint32 version`, `uint64 tensorCount`, `uint64 metadataCount`;
/// metadata entries (`string key`, `uint32 type`, value); tensor entries (`string name`,
/// `uint32 dimensionCount`, `uint64` dimensions, `uint32 type`, `uint64 offset`); padding to
/// ``alignment``; tensor data. A string is `uint64 length` then UTF-8 bytes.
public struct GGUFFile: Sendable {
    /// The four bytes every GGUF file starts with.
    public static let magic = Array("GGUF".utf8)
    /// The only version read.
    public static let version: UInt32 = 3
    /// Alignment of tensor data when `general.alignment` is absent.
    public static let defaultAlignment = 32

    /// Metadata by key.
    public let metadata: [String: GGUFValue]
    /// Metadata keys in file order.
    public let keys: [String]
    /// The tensor directory in file order.
    public let tensors: [GGUFTensorInfo]
    /// Alignment of tensor data (`general.alignment`).
    public let alignment: Int
    /// The whole file.
    public let data: Data
    let valueOffsets: [String: Int]

    /// Maps the file at `url` and parses it (see ``init(data:)``): read once, it gives both
    /// ``ModelWeights/gguf(_:path:precision:contextLength:memoryLimit:)`` and ``Tokenizer/init(gguf:)``.
    /// - Throws: ``ModelLoadError/unreadable(path:reason:)``, or ``ModelLoadError/gguf(path:_:)``
    ///   with the ``GGUFError``.
    public init(contentsOf url: URL) throws(ModelLoadError) {
        let data = try ModelLoadError.mappedContents(of: url)
        do { try self.init(data: data) } catch { throw .gguf(path: url.path, error) }
    }

    /// Parses and checks the header, metadata and tensor directory of `data`.
    /// - Throws: ``GGUFError`` naming the first bad field and its byte offset; nothing is
    ///   allocated in proportion to a count before the file is known to hold that many bytes.
    public init(data: Data) throws(GGUFError) {
        var reader = GGUFReader(data: data)
        let magic = try reader.bytes(4, field: "magic")
        guard magic == Self.magic else { throw .badMagic(found: magic) }
        let version = try reader.u32(field: "version")
        guard version == Self.version else { throw .unsupportedVersion(version) }
        let tensorCount = try reader.count(field: "tensor count", minimumBytesEach: 8 + 4 + 8 + 4 + 8)
        let metadataCount = try reader.count(field: "metadata count", minimumBytesEach: 8 + 4 + 1)
        var metadata: [String: GGUFValue] = [:], keys: [String] = [], offsets: [String: Int] = [:]
        for index in 0 ..< metadataCount {
            let keyOffset = reader.offset
            let key = try reader.string(field: "metadata key \(index)")
            guard metadata[key] == nil else { throw .invalidField(field: key, byteOffset: keyOffset, reason: "duplicate key") }
            offsets[key] = reader.offset
            metadata[key] = try reader.value(field: key)
            keys.append(key)
        }
        var alignment = Self.defaultAlignment
        if let value = metadata["general.alignment"] {
            guard case let .uint32(a) = value, a > 0, a & (a - 1) == 0, a <= 1 << 16 else {
                throw .invalidField(field: "general.alignment", byteOffset: offsets["general.alignment"]!,
                                    reason: "must be a uint32 power of two up to 65536, got \(value)")
            }
            alignment = Int(a)
        }
        var entries: [(name: String, dimensions: [Int], type: GGUFTensorType, relative: Int, infoOffset: Int)] = []
        var names = Set<String>()
        for index in 0 ..< tensorCount {
            let infoOffset = reader.offset
            let name = try reader.string(field: "tensor \(index) name")
            guard names.insert(name).inserted else {
                throw .invalidField(field: "tensor \(name)", byteOffset: infoOffset, reason: "duplicate tensor name")
            }
            let rank = try reader.u32(field: "tensor \(name) dimension count")
            guard (1 ... 4).contains(rank) else {
                throw .invalidField(field: "tensor \(name) dimension count", byteOffset: reader.offset - 4,
                                    reason: "\(rank) dimensions; GGML tensors have 1 to 4")
            }
            var dimensions: [Int] = []
            for _ in 0 ..< rank {
                let d = try reader.u64(field: "tensor \(name) dimensions")
                guard d >= 1, d <= 1 << 40 else {
                    throw .invalidField(field: "tensor \(name) dimensions", byteOffset: reader.offset - 8,
                                        reason: "dimension \(d) is outside 1...2^40")
                }
                dimensions.append(Int(d))
            }
            let rawType = try reader.u32(field: "tensor \(name) type")
            guard let type = GGUFTensorType(rawValue: rawType) else {
                throw .unsupportedTensorType(tensor: name, type: rawType, byteOffset: infoOffset)
            }
            let relative = try reader.u64(field: "tensor \(name) offset")
            guard relative % UInt64(alignment) == 0, relative <= UInt64(data.count) else {
                throw .invalidField(field: "tensor \(name) offset", byteOffset: reader.offset - 8,
                                    reason: "offset \(relative) is not a multiple of the alignment \(alignment) inside the file")
            }
            entries.append((name, dimensions, type, Int(relative), infoOffset))
        }
        let dataStart = (reader.offset + alignment - 1) / alignment * alignment
        var tensors: [GGUFTensorInfo] = []
        for e in entries {
            let (elements, overflow) = e.dimensions.reduce((1, false)) { acc, d in
                let (p, o) = acc.0.multipliedReportingOverflow(by: d)
                return (p, acc.1 || o)
            }
            guard !overflow, elements <= 1 << 40 else {
                throw .invalidField(field: "tensor \(e.name) dimensions", byteOffset: e.infoOffset, reason: "\(e.dimensions) holds too many elements")
            }
            guard e.dimensions[0] % e.type.blockSize == 0 else {
                throw .invalidField(field: "tensor \(e.name) dimensions", byteOffset: e.infoOffset,
                                    reason: "the first dimension \(e.dimensions[0]) is not a multiple of the block size \(e.type.blockSize)")
            }
            let byteCount = elements / e.type.blockSize * e.type.bytesPerBlock
            let start = dataStart + e.relative
            guard start <= data.count, byteCount <= data.count - start else {
                throw .truncatedTensorData(tensor: e.name, byteOffset: start, byteCount: byteCount, fileBytes: data.count)
            }
            tensors.append(GGUFTensorInfo(name: e.name, dimensions: e.dimensions, type: e.type, dataOffset: start,
                                          byteCount: byteCount, infoOffset: e.infoOffset))
        }
        self.metadata = metadata
        self.keys = keys
        self.tensors = tensors
        self.alignment = alignment
        self.data = data
        valueOffsets = offsets
    }

    /// The directory entry of the tensor called `name`.
    public func tensor(named name: String) -> GGUFTensorInfo? { tensors.first { $0.name == name } }

    /// An integer metadata value.
    /// - Throws: ``GGUFError/missingKey(_:)`` when absent and `fallback` is `nil`,
    ///   ``GGUFError/invalidField(field:byteOffset:reason:)`` when it is not an integer.
    public func integer(_ key: String, default fallback: Int? = nil) throws(GGUFError) -> Int {
        guard let value = metadata[key] else {
            if let fallback { return fallback }
            throw .missingKey(key)
        }
        guard let int = value.intValue else { throw wrongType(key, "an integer", value) }
        return int
    }

    /// A numeric metadata value as `Float` (see ``integer(_:default:)`` for the errors).
    public func float(_ key: String, default fallback: Float? = nil) throws(GGUFError) -> Float {
        guard let value = metadata[key] else {
            if let fallback { return fallback }
            throw .missingKey(key)
        }
        guard let double = value.doubleValue else { throw wrongType(key, "a number", value) }
        return Float(double)
    }

    /// A string metadata value (see ``integer(_:default:)`` for the errors).
    public func string(_ key: String) throws(GGUFError) -> String {
        guard let value = metadata[key] else { throw .missingKey(key) }
        guard let string = value.stringValue else { throw wrongType(key, "a string", value) }
        return string
    }

    /// An array metadata value, or `nil` when absent (see ``integer(_:default:)`` for the errors).
    public func array(_ key: String) throws(GGUFError) -> [GGUFValue]? {
        guard let value = metadata[key] else { return nil }
        guard let array = value.arrayValue else { throw wrongType(key, "an array", value) }
        return array
    }

    /// The byte offset of the value stored under `key` (for error messages).
    public func offset(of key: String) -> Int { valueOffsets[key] ?? 0 }

    private func wrongType(_ key: String, _ expected: String, _ value: GGUFValue) -> GGUFError {
        .invalidField(field: key, byteOffset: offset(of: key), reason: "expected \(expected), found GGUF type \(value.typeID)")
    }
}
