import Foundation

/// A bounds-checked little-endian cursor over a GGUF file's bytes.
struct GGUFReader {
    let data: Data
    private(set) var offset = 0

    init(data: Data) { self.data = data }

    private var remaining: Int { data.count - offset }

    mutating func bytes(_ count: Int, field: String) throws(GGUFError) -> [UInt8] {
        guard count <= remaining else { throw .truncated(field: field, byteOffset: offset) }
        let start = data.startIndex + offset
        offset += count
        return Array(data[start ..< start + count])
    }

    private mutating func little(_ width: Int, field: String) throws(GGUFError) -> UInt64 {
        guard width <= remaining else { throw .truncated(field: field, byteOffset: offset) }
        // One access to the bytes for the whole value: a `Data` subscript per byte costs an
        // exclusivity check each, which dominated reading a large vocabulary's lengths.
        let start = offset
        let value = data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> UInt64 in
            var value: UInt64 = 0
            for i in 0 ..< width { value |= UInt64(bytes[start + i]) << (8 * UInt64(i)) }
            return value
        }
        offset += width
        return value
    }

    mutating func u32(field: String) throws(GGUFError) -> UInt32 { UInt32(try little(4, field: field)) }
    mutating func u64(field: String) throws(GGUFError) -> UInt64 { try little(8, field: field) }

    /// A `uint64` count, refused when the rest of the file cannot hold that many entries.
    mutating func count(field: String, minimumBytesEach: Int) throws(GGUFError) -> Int {
        let start = offset
        let n = try u64(field: field)
        guard n <= UInt64(max(0, remaining) / minimumBytesEach) else {
            throw .invalidField(field: field, byteOffset: start, reason: "\(n) entries cannot fit in the \(remaining) bytes left")
        }
        return Int(n)
    }

    mutating func string(field: String) throws(GGUFError) -> String {
        let start = offset
        let length = try u64(field: field)
        guard length <= UInt64(remaining) else { throw .truncated(field: field, byteOffset: start) }
        let from = offset
        offset += Int(length)
        return data.withUnsafeBytes { String(decoding: UnsafeRawBufferPointer(rebasing: $0[from ..< offset]), as: UTF8.self) }
    }

    /// A typed metadata value; arrays may nest up to `depth` levels.
    mutating func value(field: String, depth: Int = 0) throws(GGUFError) -> GGUFValue {
        let typeOffset = offset
        return try value(ofType: try u32(field: field), typeOffset: typeOffset, field: field, depth: depth)
    }

    private mutating func value(ofType type: UInt32, typeOffset: Int, field: String, depth: Int) throws(GGUFError) -> GGUFValue {
        switch type {
        case 0: return .uint8(UInt8(try little(1, field: field)))
        case 1: return .int8(Int8(bitPattern: UInt8(try little(1, field: field))))
        case 2: return .uint16(UInt16(try little(2, field: field)))
        case 3: return .int16(Int16(bitPattern: UInt16(try little(2, field: field))))
        case 4: return .uint32(UInt32(try little(4, field: field)))
        case 5: return .int32(Int32(bitPattern: UInt32(try little(4, field: field))))
        case 6: return .float32(Float(bitPattern: UInt32(try little(4, field: field))))
        case 7:
            let start = offset
            let byte = try little(1, field: field)
            guard byte <= 1 else { throw .invalidField(field: field, byteOffset: start, reason: "a bool must be 0 or 1, got \(byte)") }
            return .bool(byte == 1)
        case 8: return .string(try string(field: field))
        case 9:
            guard depth < 4 else { throw .invalidField(field: field, byteOffset: typeOffset, reason: "arrays nested deeper than 4") }
            let elementTypeOffset = offset
            let elementType = try u32(field: field)
            guard elementType <= 12 else {
                throw .invalidField(field: field, byteOffset: elementTypeOffset, reason: "unknown array element type \(elementType)")
            }
            let minimum = switch elementType { case 0, 1, 7: 1; case 2, 3: 2; case 4, 5, 6: 4; case 9: 12; default: 8 }
            let n = try count(field: field, minimumBytesEach: minimum)
            var elements: [GGUFValue] = []
            elements.reserveCapacity(n)
            for _ in 0 ..< n {
                elements.append(try value(ofType: elementType, typeOffset: elementTypeOffset, field: field, depth: depth + 1))
            }
            return .array(elements)
        case 10: return .uint64(try little(8, field: field))
        case 11: return .int64(Int64(bitPattern: try little(8, field: field)))
        case 12: return .float64(Double(bitPattern: try little(8, field: field)))
        default: throw .invalidField(field: field, byteOffset: typeOffset, reason: "unknown value type \(type)")
        }
    }
}
