import Crypto
import Foundation

/// A subword BPE tokenizer: llama2.c's `tokenizer.bin` format, encoding exactly as llama2.c does,
/// or a byte-level BPE vocabulary from a GGUF file (GPT-2, Llama 3, SmolLM, Qwen2), encoding as
/// Hugging Face's `tokenizers` and llama.cpp do.
///
/// llama2.c's layout (shared by its tokenizers and the bundled one):
/// id 0 `<unk>`, id 1 BOS, id 2 EOS, ids 3...258 the byte-fallback pieces
/// `<0x00>`...`<0xFF>`, then merged pieces scored by merge order.
/// Encoding: BOS, a dummy-prefix space when the text is not empty, one piece
/// per Unicode scalar (or one byte piece per UTF-8 byte when the scalar is not
/// in the vocabulary), then repeatedly the adjacent pair whose concatenation
/// is in the vocabulary with the highest score (leftmost on ties) is merged.
///
/// A byte-level vocabulary (``init(gguf:)`` with `tokenizer.ggml.model` "gpt2") cuts text into
/// words with its model's pre-tokenizer, starts each word as one token per UTF-8 byte and merges
/// the pair with the lowest merge rank first; its BOS and EOS ids are the file's, and whether a
/// sequence starts with BOS is ``addsBOS``.
public struct Tokenizer: Sendable {
    /// Id of `<unk>` in llama2.c's layout.
    public static let unknown = 0
    /// Id of the beginning-of-sequence token in llama2.c's layout; llama2.c stops generating when it is sampled.
    public static let bos = 1
    /// Id of the end-of-sequence token in llama2.c's layout.
    public static let eos = 2
    /// Id of the byte-fallback piece for byte 0 in llama2.c's layout; byte `b` is `byteOffset + b`.
    public static let byteOffset = 3

    /// Piece bytes per id: the text each token stands for.
    public let pieces: [[UInt8]]
    /// Merge score per id (all zero in a byte-level vocabulary, whose merges are ranked by pair).
    public let scores: [Float]
    /// Length in bytes of the longest piece.
    public let maxTokenLength: Int
    /// What token ids mean under this tokenizer: the first 16 hex digits of a SHA-256 over every
    /// piece in id order (scores excluded: they change how text encodes, not what an id reads
    /// as; a byte-level vocabulary also hashes its control tokens, which read as nothing). Two
    /// tokenizers with the same identity decode every id alike, so ids saved under one are valid
    /// under the other.
    public let identity: String
    /// This vocabulary's beginning-of-sequence id (``bos`` in llama2.c's layout).
    public let bosToken: Int
    /// This vocabulary's end-of-sequence id (``eos`` in llama2.c's layout).
    public let eosToken: Int
    /// Whether a sequence starts with ``bosToken``: always in llama2.c's layout; in a byte-level
    /// vocabulary as its file's `tokenizer.ggml.add_bos_token` says (by default only Llama 3's).
    public let addsBOS: Bool
    /// Ids that text never encodes to and a grammar never allows: `<unk>`, BOS and EOS in
    /// llama2.c's layout; BOS, EOS and every control token of a byte-level vocabulary (which
    /// also decode to nothing).
    public let controlTokens: Set<Int>
    /// The chat template of the GGUF file this vocabulary came from (`tokenizer.chat_template`, Jinja
    /// source), kept as text: prompts are rendered by the session layer, which reads only the
    /// system message such a template writes when a conversation has none. `nil` when absent.
    /// Not part of ``identity``: it changes no id's text.
    public var chatTemplate: String?
    /// The pre-tokenizer, ranked merges and stored form of a byte-level vocabulary; `nil` in llama2.c's layout.
    let byteLevel: ByteLevelBPE?
    /// The id of the byte-fallback piece `<0x00>` (``byteOffset`` in llama2.c's layout; Mistral's
    /// v3 vocabularies put 768 control tokens before their byte pieces); text without a piece of
    /// its own encodes byte `b` as `byteTokenBase + b`. 0 in a byte-level vocabulary.
    public let byteTokenBase: Int
    private let ids: [[UInt8]: Int]
    /// The merges by the ids of the pair: `merges[a << 32 | b]` is `ids[pieces[a] + pieces[b]]`
    /// wherever the vocabulary holds that concatenation, so encoding looks pairs up by two
    /// integers instead of building and hashing their bytes (llama2.c's layout only).
    private let merges: [UInt64: Int32]
    /// The id of each one-byte piece (`-1` where the byte has none), for ASCII text.
    private let byteIDs: [Int32]

    /// Number of entries.
    public var vocabSize: Int { pieces.count }

    /// Whether this is a byte-level BPE vocabulary (GGUF `gpt2`) rather than llama2.c's layout.
    public var isByteLevel: Bool { byteLevel != nil }

    /// Whether llama2.c's `tokenizer.bin` holds this vocabulary whole (``serialized()``): a
    /// SentencePiece-style one with the byte pieces at ``byteOffset`` and no control tokens but
    /// `<unk>`, BOS, EOS and the ``ControlPieces`` (known by their names when read back).
    public var fitsTokenizerBin: Bool {
        byteLevel == nil && byteTokenBase == Self.byteOffset
            && controlTokens.subtracting(ControlPieces.all.compactMap(id(of:))) == [Self.unknown, Self.bos, Self.eos]
    }

    /// Ids that end a generation on their own (no chat template involved): the vocabulary's EOS,
    /// and its BOS, which llama2.c's run loop stops on (its story models separate texts with BOS
    /// and never produce EOS; a Llama 2 or Mistral model ends a text with EOS).
    public var stopTokens: Set<Int> { [eosToken, bosToken] }

    /// The ids a sequence starts with: `[bosToken]`, or none where the vocabulary adds no BOS.
    public var sequenceStart: [Int] { addsBOS ? [bosToken] : [] }

    /// A tokenizer in llama2.c's layout from pieces and scores.
    /// - Precondition: `pieces.count == scores.count`.
    public init(pieces: [[UInt8]], scores: [Float]) {
        self.init(pieces: pieces, scores: scores, byteTokenBase: Self.byteOffset, controlTokens: [])
    }

    /// A SentencePiece-style vocabulary whose byte pieces start at `byteTokenBase`, with control
    /// tokens besides `<unk>`, BOS and EOS (a GGUF file's type-3 tokens, e.g. Mistral's `[INST]`).
    init(pieces: [[UInt8]], scores: [Float], byteTokenBase: Int, controlTokens: Set<Int>) {
        precondition(pieces.count == scores.count, "one score per piece")
        self.init(pieces: pieces, scores: scores, merges: Self.scoredMerges(pieces), byteLevel: nil, byteTokenBase: byteTokenBase,
                  bosToken: Self.bos, eosToken: Self.eos, addsBOS: true, controlTokens: controlTokens.union([Self.unknown, Self.bos, Self.eos]))
    }

    /// A byte-level vocabulary: `pieces` are the bytes each token stands for.
    init(byteLevel: ByteLevelBPE, pieces: [[UInt8]], bosToken: Int, eosToken: Int, addsBOS: Bool, controlTokens: Set<Int>) {
        self.init(pieces: pieces, scores: [Float](repeating: 0, count: pieces.count), merges: [:], byteLevel: byteLevel,
                  byteTokenBase: 0, bosToken: bosToken, eosToken: eosToken, addsBOS: addsBOS, controlTokens: controlTokens)
    }

    private init(pieces: [[UInt8]], scores: [Float], merges: [UInt64: Int32], byteLevel: ByteLevelBPE?, byteTokenBase: Int,
                 bosToken: Int, eosToken: Int, addsBOS: Bool, controlTokens: Set<Int>) {
        self.pieces = pieces
        self.byteTokenBase = byteTokenBase
        self.scores = scores
        self.merges = merges
        self.byteLevel = byteLevel
        self.bosToken = bosToken
        self.eosToken = eosToken
        self.addsBOS = addsBOS
        self.controlTokens = controlTokens
        maxTokenLength = pieces.map(\.count).max() ?? 0
        var hash = SHA256()
        for piece in pieces {
            withUnsafeBytes(of: UInt32(piece.count).littleEndian) { hash.update(bufferPointer: $0) }
            hash.update(data: piece)
        }
        if byteLevel != nil {   // llama2.c-layout identities stay as they were
            hash.update(data: Array("byte-level".utf8))
            for id in controlTokens.sorted() { withUnsafeBytes(of: UInt32(id).littleEndian) { hash.update(bufferPointer: $0) } }
        }
        identity = hash.finalize().prefix(8).map { String(format: "%02x", $0) }.joined()
        var ids: [[UInt8]: Int] = [:]
        ids.reserveCapacity(pieces.count)
        for (id, piece) in pieces.enumerated() where ids[piece] == nil { ids[piece] = id }
        self.ids = ids
        byteIDs = (0 ... 255).map { Int32(ids[[UInt8($0)]] ?? -1) }
    }

    /// llama2.c's merges: every split of every piece into two pieces of the vocabulary.
    private static func scoredMerges(_ pieces: [[UInt8]]) -> [UInt64: Int32] {
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
        return merges
    }

    static func pair(_ a: Int, _ b: Int) -> UInt64 { UInt64(UInt32(a)) << 32 | UInt64(UInt32(b)) }

    /// The id of a piece, if it is in the vocabulary.
    public func id(of piece: String) -> Int? { ids[Array(piece.utf8)] }

    /// Tokenizes `text` as llama2.c's `encode` does, or for a byte-level vocabulary as its model's
    /// Hugging Face tokenizer does (control tokens are never read from text).
    /// - Parameters:
    ///   - text: any string (empty, non-ASCII and emoji included).
    ///   - bos: `text` starts a sequence: prepend ``sequenceStart`` (BOS where the vocabulary adds one).
    ///   - eos: append ``eosToken``.
    /// - Returns: token ids.
    /// - Complexity: O(n log n) in the UTF-8 length (a heap replaces llama2.c's O(n²) rescans;
    ///   the merge order is the same).
    public func encode(_ text: String, bos: Bool = true, eos: Bool = false) -> [Int] {
        var out = bos ? sequenceStart : []
        if let byteLevel { out += encodeWords(text, byteLevel) } else {
            out += mergeByScore(scalarPieces(text))
        }
        if eos { out.append(eosToken) }
        return out
    }

    /// Tokenizes `text` that continues text before it: as ``encode(_:bos:eos:)`` without BOS, and
    /// in llama2.c's layout without the dummy-prefix space (which SentencePiece writes once, where
    /// a text starts). For chat markers that follow a message within one template string, e.g.
    /// Llama 2's `\n<</SYS>>\n\n`.
    package func encode(continuing text: String) -> [Int] {
        guard let byteLevel else { return mergeByScore(scalarPieces(text, prefixSpace: false)) }
        return encodeWords(text, byteLevel)
    }

    /// llama2.c's merge loop over starting pieces: the best-scored pair first.
    private func mergeByScore(_ symbols: [Int]) -> [Int] {
        merge(symbols) { a, b in merges[Self.pair(a, b)].map { (scores[Int($0)], Int($0)) } }
    }

    /// llama2.c's starting pieces: a dummy-prefix space (unless `prefixSpace` is false), then one
    /// piece per scalar (its UTF-8 bytes' pieces where the scalar has none).
    private func scalarPieces(_ text: String, prefixSpace: Bool = true) -> [Int] {
        var symbols: [Int] = []
        symbols.reserveCapacity(text.utf8.count + 1)
        if prefixSpace, !text.isEmpty, let space = ids[[0x20]] { symbols.append(space) }
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {   // one piece per scalar: a lead byte and its continuation bytes
            let lead = bytes[i]
            if lead < 0x80 {
                let id = byteIDs[Int(lead)]
                symbols.append(id >= 0 ? Int(id) : byteTokenBase + Int(lead))
                i += 1
                continue
            }
            var end = i + 1
            while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
            if let id = ids[Array(bytes[i ..< end])] {
                symbols.append(id)
            } else {
                symbols.append(contentsOf: bytes[i ..< end].map { byteTokenBase + Int($0) })
            }
            i = end
        }
        return symbols
    }

    /// A byte-level vocabulary's encoding: each pre-tokenized word from its bytes' tokens, merged
    /// lowest rank first (or taken whole where the pre-tokenizer says so and it is a token).
    private func encodeWords(_ text: String, _ bpe: ByteLevelBPE) -> [Int] {
        guard !bpe.userTokens.isEmpty else { return encodeWords(Array(text.unicodeScalars), bpe) }
        return bpe.splitAtUserTokens(Array(text.utf8)).flatMap { fragment in
            // Cut at whole tokens of valid UTF-8, so every fragment is whole characters.
            fragment.id.map { [$0] } ?? encodeWords(Array(String(decoding: fragment.bytes, as: UTF8.self).unicodeScalars), bpe)
        }
    }

    private func encodeWords(_ scalars: [Unicode.Scalar], _ bpe: ByteLevelBPE) -> [Int] {
        var out: [Int] = []
        out.reserveCapacity(scalars.count)
        var bytes: [UInt8] = []
        for word in bpe.preTokenizer.words(scalars) {
            bytes.removeAll(keepingCapacity: true)
            for scalar in scalars[word] { bytes += UTF8.encode(scalar)! }
            if bpe.preTokenizer.takesWholeWords, let id = ids[bytes], !controlTokens.contains(id) {
                out.append(id)
                continue
            }
            out += merge(bytes.map { Int(bpe.byteTokens[Int($0)]) }) { a, b in
                bpe.merges[Self.pair(a, b)].map { (-Float($0.rank), Int($0.merged)) }
            }
        }
        return out
    }

    /// The bytes `token` contributes to text when it follows `previous`.
    ///
    /// As in llama2.c: a piece right after BOS loses its leading space, and a
    /// byte piece `<0xNN>` is the raw byte. BOS and EOS contribute nothing
    /// (llama2.c never prints them). In a byte-level vocabulary a token is its
    /// bytes wherever it stands, and control tokens contribute nothing.
    public func bytes(of token: Int, after previous: Int?) -> [UInt8] {
        guard token >= 0, token < pieces.count else { return [] }
        if byteLevel != nil { return controlTokens.contains(token) ? [] : pieces[token] }
        guard token != Self.bos, token != Self.eos else { return [] }
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

    /// Greedy pair merging: the pair `merge` ranks highest (first of its result: priority, merged
    /// id) is merged first, leftmost on ties; with llama2.c's scores equivalent to its rescanning loop.
    private func merge(_ symbols: [Int], _ merge: (Int, Int) -> (priority: Float, merged: Int)?) -> [Int] {
        let n = symbols.count
        guard n > 1 else { return symbols }
        var piece = symbols
        var next = Array(1 ... n), previous = Array(-1 ..< n - 1)
        var alive = [Bool](repeating: true, count: n)
        var heap = MergeQueue()
        func push(_ left: Int) {
            let right = next[left]
            guard left >= 0, right < n, let (priority, id) = merge(piece[left], piece[right]) else { return }
            heap.push(.init(score: priority, left: left, leftPiece: piece[left], rightPiece: piece[right], merged: id))
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
