import Foundation

extension GeneratedContent {
    /// Content read from JSON text (object keys keep their order). The text may stop short, as
    /// a partly generated response does: `{"title": "A story of` reads as a structure whose
    /// `title` is `"A story of"`, with ``isComplete`` false on both.
    /// - Throws: ``GeneratedContentError/invalidJSON(offset:reason:)`` naming the byte where
    ///   the text stops being JSON, or when no value has started.
    public init(json: String) throws {
        var reader = JSONReader(Array(json.utf8), partial: true)
        self = try reader.document()
    }

    /// Content read from JSON text that must be whole: saved content and tool arguments, where
    /// a text that stops short is damage, not a value still being written.
    package init(wholeJSON json: String) throws {
        var reader = JSONReader(Array(json.utf8), partial: false)
        self = try reader.document()
    }

    /// The part of a JSON value that `text` holds, as content whose unfinished values have
    /// ``isComplete`` false: what a streamed structured response shows so far. `nil` when
    /// no value has started.
    package static func partial(json text: [UInt8]) throws -> GeneratedContent? {
        var reader = JSONReader(text, partial: true)
        return try reader.value()
    }

    /// The content as compact JSON: structure keys in their order, whole numbers without a
    /// fraction, strings escaped as JSON requires.
    public var jsonString: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch kind {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .number(n): out += Self.format(n)
        case let .string(s): Self.quote(s, into: &out)
        case let .array(elements):
            out += "["
            for (i, element) in elements.enumerated() {
                if i > 0 { out += "," }
                element.write(to: &out)
            }
            out += "]"
        case let .structure(properties, keys):
            out += "{"
            for (i, key) in keys.enumerated() {
                if i > 0 { out += "," }
                Self.quote(key, into: &out)
                out += ":"
                (properties[key] ?? GeneratedContent(kind: .null)).write(to: &out)
            }
            out += "}"
        }
    }

    static func format(_ n: Double) -> String {
        guard n.isFinite else { return "null" }
        if n == n.rounded(), abs(n) < 1e15 { return String(Int64(n)) }
        return "\(n)"
    }

    static func quote(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// A JSON reader that keeps object key order and, in partial mode, reads a truncated
/// document as far as it goes.
struct JSONReader {
    let bytes: [UInt8]
    let partial: Bool
    var position = 0
    var depth = 0

    /// Nesting deeper than this is rejected rather than recursed into. Reading, rendering and
    /// comparing content recurse once a level; at 64 levels a debug build reads, renders and
    /// compares on a 512 KiB thread stack (Apple's secondary threads) with room to spare, where
    /// 192 overflowed it. Guided content nests at most ``GenerationSchema/nestingLimit`` levels.
    static let maximumDepth = 64

    init(_ bytes: [UInt8], partial: Bool) {
        self.bytes = bytes
        self.partial = partial
    }

    var atEnd: Bool { position >= bytes.count }

    func fail(_ reason: String) -> GeneratedContentError { .invalidJSON(offset: position, reason: reason) }

    mutating func skipSpace() {
        while position < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[position]) { position += 1 }
    }

    /// One whole value and nothing after it but whitespace.
    mutating func document() throws -> GeneratedContent {
        guard let value = try value() else { throw fail("no value") }
        skipSpace()
        guard atEnd else { throw fail("text after the value") }
        return value
    }

    /// The next value; `nil` only in partial mode when the text ends before a value shows.
    mutating func value() throws -> GeneratedContent? {
        skipSpace()
        guard !atEnd else {
            if partial { return nil }
            throw fail("the text ends where a value should start")
        }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try nested { try $0.structure() }
        case UInt8(ascii: "["): return try nested { try $0.array() }
        case UInt8(ascii: "\""):
            let (s, closed) = try string()
            return GeneratedContent(kind: .string(s), isComplete: closed)
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0") ... UInt8(ascii: "9"): return try number()
        default: throw fail("unexpected character '\(Character(UnicodeScalar(bytes[position])))'")
        }
    }

    private mutating func nested(_ body: (inout JSONReader) throws -> GeneratedContent) throws -> GeneratedContent {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maximumDepth else { throw fail("nesting deeper than \(Self.maximumDepth)") }
        return try body(&self)
    }

    private mutating func literal(_ word: String, _ kind: GeneratedContent.Kind) throws -> GeneratedContent? {
        let w = Array(word.utf8)
        let available = min(w.count, bytes.count - position)
        guard Array(bytes[position ..< position + available]) == Array(w.prefix(available)) else {
            throw fail("expected '\(word)'")
        }
        position += available
        if available < w.count {
            if partial { return nil }
            throw fail("the text ends inside '\(word)'")
        }
        return GeneratedContent(kind: kind, isComplete: true)
    }

    private mutating func number() throws -> GeneratedContent? {
        let start = position
        while position < bytes.count, "+-0123456789.eE".utf8.contains(bytes[position]) { position += 1 }
        let text = String(decoding: bytes[start ..< position], as: UTF8.self)
        if atEnd, partial {
            // The number may still grow, if what is there begins one (`-`, `1.`, `2e+` do; `01` does
            // not); show the longest prefix that reads as one.
            guard Self.parseNumber(text) != nil || Self.parseNumber(text + "0") != nil else {
                position = start
                throw fail("malformed number '\(text)'")
            }
            var prefix = Substring(text)
            while !prefix.isEmpty, Double(prefix) == nil { prefix = prefix.dropLast() }
            guard let value = Double(prefix) else { return nil }
            try checkRange(value, text, start: start)   // more digits would not bring it back
            return GeneratedContent(kind: .number(value), isComplete: false)
        }
        guard let value = Self.parseNumber(text) else {
            position = start
            throw fail("malformed number '\(text)'")
        }
        try checkRange(value, text, start: start)
        return GeneratedContent(kind: .number(value), isComplete: true)
    }

    /// Refuses a number beyond `Double`'s range: it would read as infinity, which JSON cannot write back.
    private mutating func checkRange(_ value: Double, _ text: String, start: Int) throws {
        guard value.isFinite else {
            position = start
            throw fail("number '\(text)' is out of range")
        }
    }

    /// JSON's number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    static func parseNumber(_ text: String) -> Double? {
        let b = Array(text.utf8)
        var i = 0
        func digits() -> Int {
            let s = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
            return i - s
        }
        if i < b.count, b[i] == UInt8(ascii: "-") { i += 1 }
        let intStart = i
        let intDigits = digits()
        guard intDigits > 0, !(intDigits > 1 && b[intStart] == 0x30) else { return nil }
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { return nil }
        }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { return nil }
        }
        guard i == b.count else { return nil }
        return Double(text)
    }

    /// The code named by the four hex digits of a `\u` escape at `position` (moved past them), or
    /// nil when the text ends first.
    private mutating func hexEscape() throws -> UInt32? {
        var code: UInt32 = 0
        for c in bytes[position ..< min(position + 4, bytes.count)] {
            guard let digit = c.hexDigitValue else { throw fail("malformed \\u escape") }
            code = code << 4 | UInt32(digit)
        }
        guard position + 4 <= bytes.count else { return nil }
        position += 4
        return code
    }

    /// A string; `closed` is false when the text ended inside it (partial mode).
    mutating func string() throws -> (String, closed: Bool) {
        position += 1
        var out: [UInt8] = []
        while position < bytes.count {
            let c = bytes[position]
            switch c {
            case UInt8(ascii: "\""):
                position += 1
                return (String(decoding: out, as: UTF8.self), true)
            case UInt8(ascii: "\\"):
                guard position + 1 < bytes.count else { position = bytes.count; break }
                let e = bytes[position + 1]
                position += 2
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "u"):
                    guard let code = try hexEscape() else { position = bytes.count; break }
                    var scalar = UnicodeScalar(code)
                    // A high surrogate followed by an escaped low one is one character beyond the first plane.
                    if 0xD800 ..< 0xDC00 ~= code, position + 1 < bytes.count,
                       bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") {
                        let mark = position
                        position += 2
                        if let low = try hexEscape(), 0xDC00 ..< 0xE000 ~= low {
                            scalar = UnicodeScalar(0x10000 + (code - 0xD800) << 10 + (low - 0xDC00))
                        } else {
                            position = mark   // not a low half: the next escape stands alone
                        }
                    }
                    out += Array(String(Character(scalar ?? "\u{FFFD}")).utf8)
                default:
                    position -= 1
                    throw fail("unknown escape")
                }
            case 0 ..< 0x20: throw fail("a control character inside a string")
            default:
                out.append(c)
                position += 1
            }
        }
        if partial { return (String(decoding: out, as: UTF8.self), false) }
        throw fail("the text ends inside a string")
    }

    private mutating func array() throws -> GeneratedContent {
        position += 1
        var elements: [GeneratedContent] = []
        func open() -> GeneratedContent { GeneratedContent(kind: .array(elements), isComplete: false) }
        skipSpace()
        if !atEnd, bytes[position] == UInt8(ascii: "]") {
            position += 1
            return GeneratedContent(kind: .array([]), isComplete: true)
        }
        while true {
            guard let element = try value() else { return open() }
            elements.append(element)
            if !element.isComplete { return open() }
            skipSpace()
            guard !atEnd else {
                if partial { return open() }
                throw fail("the text ends inside an array")
            }
            switch bytes[position] {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"):
                position += 1
                return GeneratedContent(kind: .array(elements), isComplete: true)
            default: throw fail("expected ',' or ']' in an array")
            }
        }
    }

    private mutating func structure() throws -> GeneratedContent {
        position += 1
        var properties: [String: GeneratedContent] = [:], keys: [String] = []
        func open() -> GeneratedContent { GeneratedContent(kind: .structure(properties: properties, orderedKeys: keys), isComplete: false) }
        func endOfText() throws -> GeneratedContent {
            if partial { return open() }
            throw fail("the text ends inside a structure")
        }
        skipSpace()
        if !atEnd, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return GeneratedContent(kind: .structure(properties: [:], orderedKeys: []), isComplete: true)
        }
        while true {
            skipSpace()
            guard !atEnd else { return try endOfText() }
            guard bytes[position] == UInt8(ascii: "\"") else { throw fail("expected a property name") }
            let (key, closed) = try string()
            guard closed else { return try endOfText() }
            skipSpace()
            guard !atEnd else { return try endOfText() }
            guard bytes[position] == UInt8(ascii: ":") else { throw fail("expected ':' after a property name") }
            position += 1
            guard let value = try value() else { return open() }
            if properties.updateValue(value, forKey: key) == nil { keys.append(key) }
            if !value.isComplete { return open() }
            skipSpace()
            guard !atEnd else { return try endOfText() }
            switch bytes[position] {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"):
                position += 1
                return GeneratedContent(kind: .structure(properties: properties, orderedKeys: keys), isComplete: true)
            default: throw fail("expected ',' or '}' in a structure")
            }
        }
    }
}

extension GeneratedContent: Codable {
    /// Reads content saved by ``encode(to:)``: its JSON text, as a string.
    public init(from decoder: any Decoder) throws {
        let json = try decoder.singleValueContainer().decode(String.self)
        try self.init(wholeJSON: json)
    }

    /// Saves the content as its JSON text, in a string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(jsonString)
    }
}
