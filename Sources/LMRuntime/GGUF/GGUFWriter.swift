import Foundation

/// Builds a GGUF (version 3) file: metadata in insertion order, then tensors, each aligned.
struct GGUFWriter {
    private var metadata: [(String, GGUFValue)] = []
    private var tensors: [(name: String, dimensions: [Int], type: GGUFTensorType, bytes: Data)] = []
    let alignment = GGUFFile.defaultAlignment

    mutating func set(_ key: String, _ value: GGUFValue) { metadata.append((key, value)) }

    /// Adds a matrix as a tensor of GGML dimensions `[cols, rows]` (or `[cols]` when `vector`), in
    /// a writable encoding (``GGUFTensorType/isWritable``; the public writers check it).
    mutating func add(_ name: String, _ matrix: Matrix, type: GGUFTensorType, vector: Bool = false) {
        let dimensions = vector ? [matrix.rows * matrix.cols] : [matrix.cols, matrix.rows]
        var bytes = Data()
        switch type {
        case .f32: Kernels.appendLittleEndianFloats(matrix, to: &bytes)
        case .f16: Kernels.appendHalfs(matrix, to: &bytes)
        case .q8_0: Kernels.appendQ8_0(matrix, to: &bytes)
        default: preconditionFailure("\(type.ggmlName) is not written (callers check isWritable)")
        }
        tensors.append((name, dimensions, type, bytes))
    }

    /// Adds a tensor whose bytes are already encoded (tests write encodings the package does not).
    mutating func addEncoded(_ name: String, dimensions: [Int], type: GGUFTensorType, bytes: Data) {
        tensors.append((name, dimensions, type, bytes))
    }

    /// The file's bytes.
    func data() -> Data {
        var out = Data()
        func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
        func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
        func string(_ s: String) { u64(UInt64(s.utf8.count)); out.append(contentsOf: s.utf8) }
        func scalar(_ value: GGUFValue) {
            switch value {
            case let .uint8(v): out.append(v)
            case let .int8(v): out.append(UInt8(bitPattern: v))
            case let .uint16(v): withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
            case let .int16(v): withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
            case let .uint32(v): u32(v)
            case let .int32(v): u32(UInt32(bitPattern: v))
            case let .uint64(v): u64(v)
            case let .int64(v): u64(UInt64(bitPattern: v))
            case let .float32(v): u32(v.bitPattern)
            case let .float64(v): u64(v.bitPattern)
            case let .bool(v): out.append(v ? 1 : 0)
            case let .string(s): string(s)
            case let .array(elements):
                u32(elements.first?.typeID ?? 0)
                u64(UInt64(elements.count))
                elements.forEach(scalar)
            }
        }
        out.append(contentsOf: GGUFFile.magic)
        u32(GGUFFile.version)
        u64(UInt64(tensors.count))
        u64(UInt64(metadata.count))
        for (key, value) in metadata {
            string(key)
            u32(value.typeID)
            scalar(value)
        }
        var offset = 0
        for t in tensors {
            string(t.name)
            u32(UInt32(t.dimensions.count))
            t.dimensions.forEach { u64(UInt64($0)) }
            u32(t.type.rawValue)
            u64(UInt64(offset))
            offset += (t.bytes.count + alignment - 1) / alignment * alignment
        }
        for t in tensors {
            out.append(contentsOf: repeatElement(0, count: (alignment - out.count % alignment) % alignment))
            out.append(t.bytes)
        }
        return out
    }
}
