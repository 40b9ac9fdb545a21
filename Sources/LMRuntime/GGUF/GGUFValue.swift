/// One metadata value of a GGUF file, in the type the file stores it.
public enum GGUFValue: Sendable, Equatable {
    case uint8(UInt8), int8(Int8), uint16(UInt16), int16(Int16), uint32(UInt32), int32(Int32)
    case uint64(UInt64), int64(Int64), float32(Float), float64(Double), bool(Bool), string(String)
    /// An array; GGUF arrays hold values of one type.
    case array([GGUFValue])

    /// The value as an `Int` when it is an integer that fits.
    public var intValue: Int? {
        switch self {
        case let .uint8(v): Int(v)
        case let .int8(v): Int(v)
        case let .uint16(v): Int(v)
        case let .int16(v): Int(v)
        case let .uint32(v): Int(v)
        case let .int32(v): Int(v)
        case let .uint64(v): Int(exactly: v)
        case let .int64(v): Int(v)
        default: nil
        }
    }

    /// The value as a `Double` when it is a number.
    public var doubleValue: Double? {
        switch self {
        case let .float32(v): Double(v)
        case let .float64(v): v
        default: intValue.map(Double.init)
        }
    }

    /// The text when the value is a string.
    public var stringValue: String? {
        if case let .string(s) = self { s } else { nil }
    }

    /// The elements when the value is an array.
    public var arrayValue: [GGUFValue]? {
        if case let .array(a) = self { a } else { nil }
    }

    /// The GGUF type id of this value (`GGUF_TYPE_*`).
    var typeID: UInt32 {
        switch self {
        case .uint8: 0
        case .int8: 1
        case .uint16: 2
        case .int16: 3
        case .uint32: 4
        case .int32: 5
        case .float32: 6
        case .bool: 7
        case .string: 8
        case .array: 9
        case .uint64: 10
        case .int64: 11
        case .float64: 12
        }
    }
}
