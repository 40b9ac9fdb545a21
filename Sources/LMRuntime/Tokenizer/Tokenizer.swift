import Crypto
import Foundation

/// A subword BPE tokenizer in llama2.c's `tokenizer.bin` format, encoding exactly as llama2.c does.
///
/// Vocabulary layout (shared by llama2.c's tokenizers and the bundled one):
/// id 0 `<unk>`, id 1 BOS, id 2 EOS, ids 3...258 the byte-fallback pieces
/// `<0x00>`...`<0xFF>`, then merged pieces scored by merge order.
/// Encoding: BOS, a dummy-prefix space when the text is not empty, one piece
/// per Unicode scalar (or one byte piece per UTF-8 byte when the scalar is not
/// in the vocabulary), then repeatedly the adjacent pair whose concatenation
/// is in the vocabulary with the highest score (leftmost on ties) is merged.
public struct Tokenizer: Sendable {
    /// Id of `<unk>`.
    public static let unknown = 0
    /// Id of the beginning-of-sequence token; llama2.c stops generating when it is sampled.
    public static let bos = 1
    /// Id of the end-of-sequence token.
    public static let eos = 2
    /// Id of the byte-fallback piece for byte 0; byte `b` is `byteOffset + b`.
    public static let byteOffset = 3

    /// Piece bytes per id.
    public let pieces: [[UInt8]]
    /// Merge score per id.
    public let scores: [Float]
    /// Length in bytes of the longest piece.
    public let maxTokenLength: Int
    /// What token ids mean under this tokenizer: the first 16 hex digits of a SHA-256 over every
    /// piece in id order (scores excluded: they change how text encodes, not what an id reads
    /// as). Two tokenizers with the same identity decode every id alike, so ids saved under one
    /// are valid under the other.
    public let identity: String
    private let ids: [[UInt8]: Int]
    /// The merges by the ids of the pair: `merges[a << 32 | b]` is `ids[pieces[a] + pieces[b]]`
    /// wherever the vocabulary holds that concatenation, so encoding looks pairs up by two
    /// integers instead of building and hashing their bytes.
    private let merges: [UInt64: Int32]
    /// The id of each one-byte piece (`-1` where the byte has none), for ASCII text.
    private let byteIDs: [Int32]

    /// Number of entries.
    public var vocabSize: Int { pieces.count }

    /// A tokenizer from pieces and scores.
    /// - Precondition: `pieces.count == scores.count`.
    public init(pieces: [[UInt8]], scores: [Float]) {
        precondition(pieces.count == scores.count, "one score per piece")
        self.pieces = pieces
        self.scores = scores
        maxTokenLength = pieces.map(\.count).max() ?? 0
        var hash = SHA256()
        for piece in pieces {
            withUnsafeBytes(of: UInt32(piece.count).littleEndian) { hash.update(bufferPointer: $0) }
            hash.update(data: piece)
        }
        identity = hash.finalize().prefix(8).map { String(format: "%02x", $0) }.joined()
        var ids: [[UInt8]: Int] = [:]
        var sharing: [[UInt8]: [Int]] = [:]   // every id of each piece (a vocabulary may repeat one)
        for (id, piece) in pieces.enumerated() {
            if ids[piece] == nil { ids[piece] = id }
            sharing[piece, default: []].append(id)
        }
        var merges: [UInt64: Int32] = [:]
        // A vocabulary with an empty piece also merges it with any piece, as llama2.c's loop
        // (which looks up the two pieces' bytes run together) does: splits at both ends.
        let ends = sharing[[]] == nil ? 0 : 1
        for (piece, merged) in ids where ends == 1 || piece.count > 1 {
            for split in 1 - ends ..< piece.count + ends {
                guard let lefts = sharing[Array(piece[..<split])], let rights = sharing[Array(piece[split...])] else { continue }
                for a in lefts { for b in rights { merges[Self.pair(a, b)] = Int32(merged) } }
            }
        }
        self.ids = ids
        self.merges = merges
        byteIDs = (0 ... 255).map { Int32(ids[[UInt8($0)]] ?? -1) }
    }

    private static func pair(_ a: Int, _ b: Int) -> UInt64 { UInt64(UInt32(a)) << 32 | UInt64(UInt32(b)) }

    /// The id of a piece, if it is in the vocabulary.
    public func id(of piece: String) -> Int? { ids[Array(piece.utf8)] }

    /// Tokenizes `text` as llama2.c's `encode` does.
    /// - Parameters:
    ///   - text: any string (empty, non-ASCII and emoji included).
    ///   - bos: prepend ``bos``.
    ///   - eos: append ``eos``.
    /// - Returns: token ids.
    /// - Complexity: O(n log n) in the UTF-8 length (a heap replaces llama2.c's O(n²) rescans;
    ///   the merge order is the same).
    public func encode(_ text: String, bos: Bool = true, eos: Bool = false) -> [Int] {
        var symbols: [Int] = []
        symbols.reserveCapacity(text.utf8.count + 1)
        if !text.isEmpty, let space = ids[[0x20]] { symbols.append(space) }
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {   // one piece per scalar: a lead byte and its continuation bytes
            let lead = bytes[i]
            if lead < 0x80 {
                let id = byteIDs[Int(lead)]
                symbols.append(id >= 0 ? Int(id) : Self.byteOffset + Int(lead))
                i += 1
                continue
            }
            var end = i + 1
            while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
            if let id = ids[Array(bytes[i ..< end])] {
                symbols.append(id)
            } else {
                symbols.append(contentsOf: bytes[i ..< end].map { Self.byteOffset + Int($0) })
            }
            i = end
        }
        var out = bos ? [Self.bos] : []
        out += merge(symbols)
        if eos { out.append(Self.eos) }
        return out
    }

    /// The bytes `token` contributes to text when it follows `previous`.
    ///
    /// As in llama2.c: a piece right after BOS loses its leading space, and a
    /// byte piece `<0xNN>` is the raw byte. BOS and EOS contribute nothing
    /// (llama2.c never prints them).
    public func bytes(of token: Int, after previous: Int?) -> [UInt8] {
        guard token >= 0, token < pieces.count, token != Self.bos, token != Self.eos else { return [] }
        var piece = pieces[token][...]
        if previous == Self.bos, piece.first == 0x20 { piece = piece.dropFirst() }
        if let byte = Self.byteValue(piece) { return [byte] }
        return Array(piece)
    }

    /// Decodes a token sequence to text (invalid UTF-8 from byte pieces becomes U+FFFD).
    public func decode(_ tokens: [Int]) -> String {
        var bytes: [UInt8] = []
        var previous: Int?
        for token in tokens {
            bytes += self.bytes(of: token, after: previous)
            previous = token
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `<0xNN>` → NN.
    static func byteValue(_ piece: ArraySlice<UInt8>) -> UInt8? {
        guard piece.count == 6, Array(piece.prefix(3)) == Array("<0x".utf8), piece.last == UInt8(ascii: ">") else {
            return nil
        }
        return UInt8(String(decoding: piece.dropFirst(3).prefix(2), as: UTF8.self), radix: 16)
    }

    /// Greedy best-score pair merging; equivalent to llama2.c's rescanning loop.
    private func merge(_ symbols: [Int]) -> [Int] {
        let n = symbols.count
        guard n > 1 else { return symbols }
        var piece = symbols
        var next = Array(1 ... n), previous = Array(-1 ..< n - 1)
        var alive = [Bool](repeating: true, count: n)
        var heap = MergeQueue()
        func push(_ left: Int) {
            let right = next[left]
            guard left >= 0, right < n, let id = merges[Self.pair(piece[left], piece[right])].map(Int.init) else { return }
            heap.push(.init(score: scores[id], left: left, leftPiece: piece[left], rightPiece: piece[right], merged: id))
        }
        for i in 0 ..< n - 1 { push(i) }
        while let m = heap.pop() {
            let right = next[m.left]
            // Skip candidates made stale by an earlier merge of either side.
            guard alive[m.left], right < n, piece[m.left] == m.leftPiece, piece[right] == m.rightPiece else { continue }
            piece[m.left] = m.merged
            alive[right] = false
            next[m.left] = next[right]
            if next[right] < n { previous[next[right]] = m.left }
            if previous[m.left] >= 0 { push(previous[m.left]) }
            push(m.left)
        }
        var out: [Int] = []
        var i = 0
        while i < n { out.append(piece[i]); i = next[i] }
        return out
    }
}

/// A max-heap of merge candidates: highest score first, then leftmost.
struct MergeQueue {
    struct Candidate {
        var score: Float
        var left: Int
        var leftPiece: Int
        var rightPiece: Int
        var merged: Int

        func outranks(_ other: Candidate) -> Bool {
            score > other.score || (score == other.score && left < other.left)
        }
    }

    private var items: [Candidate] = []

    mutating func push(_ c: Candidate) {
        items.append(c)
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard items[i].outranks(items[parent]) else { break }
            items.swapAt(i, parent)
            i = parent
        }
    }

    mutating func pop() -> Candidate? {
        guard let top = items.first else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var best = i
                if l < items.count, items[l].outranks(items[best]) { best = l }
                if r < items.count, items[r].outranks(items[best]) { best = r }
                if best == i { break }
                items.swapAt(i, best)
                i = best
            }
        }
        return top
    }
}
