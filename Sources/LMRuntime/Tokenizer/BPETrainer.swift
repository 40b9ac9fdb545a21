import Foundation

/// Why a tokenizer could not be trained.
public enum BPETrainerError: Error, Equatable, CustomStringConvertible {
    /// The requested size cannot hold the special and byte tokens plus the corpus's characters.
    case vocabularyTooSmall(requested: Int, minimum: Int)
    /// The corpus has no text.
    case emptyCorpus

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case let .vocabularyTooSmall(requested, minimum):
            "a vocabulary of \(requested) cannot hold the \(minimum) special, byte and character tokens this corpus needs"
        case .emptyCorpus: "the training corpus is empty"
        }
    }
}

/// Learns a byte-fallback BPE vocabulary in the llama2.c layout from plain text.
///
/// Text is split into words the way the encoder will see them: a space starts
/// a word and belongs to it, other whitespace stands alone, and every text
/// gets the encoder's dummy-prefix space. Starting from the corpus's
/// characters, the most frequent adjacent pair (ties broken by the pieces'
/// bytes, so training is deterministic) is merged until the vocabulary is full
/// or no pair is left. Merge `i` gets score `-i`, which makes llama2.c's
/// highest-score-first encoder replay the merges in training order.
public struct BPETrainer: Sendable {
    /// The vocabulary size to reach (fewer when the corpus runs out of pairs).
    public var vocabSize: Int
    /// Pieces reserved after the byte tokens (control markers inserted by id, never produced from text).
    public var reservedPieces: [String]

    /// A trainer.
    /// - Parameters:
    ///   - vocabSize: target vocabulary size.
    ///   - reservedPieces: extra control pieces, in id order, right after the byte tokens.
    public init(vocabSize: Int, reservedPieces: [String] = []) {
        self.vocabSize = vocabSize
        self.reservedPieces = reservedPieces
    }

    /// Trains on `texts`.
    /// - Throws: ``BPETrainerError`` for an empty corpus or a vocabulary too small for its characters.
    public func train(on texts: [String]) throws -> Tokenizer {
        var pieces: [[UInt8]] = [Array("<unk>".utf8), Array("\n<s>\n".utf8), Array("\n</s>\n".utf8)]
        pieces += (0 ... 255).map { Array(String(format: "<0x%02X>", $0).utf8) }
        pieces += reservedPieces.map { Array($0.utf8) }
        var scores = [Float](repeating: 0, count: pieces.count)
        var ids: [[UInt8]: Int] = [:]
        for (id, piece) in pieces.enumerated() { ids[piece] = id }

        // Word frequencies, words as arrays of piece ids (one per Unicode scalar).
        var wordCounts: [String: Int] = [:]
        for text in texts where !text.isEmpty {
            for word in Self.words(" " + text) { wordCounts[word, default: 0] += 1 }
        }
        guard !wordCounts.isEmpty else { throw BPETrainerError.emptyCorpus }
        let characters = Set(wordCounts.keys.flatMap { $0.unicodeScalars.map { Array(String($0).utf8) } })
        let newCharacters = characters.filter { ids[$0] == nil }.sorted { $0.lexicographicallyPrecedes($1) }
        guard pieces.count + newCharacters.count <= vocabSize else {
            throw BPETrainerError.vocabularyTooSmall(requested: vocabSize, minimum: pieces.count + newCharacters.count)
        }
        for piece in newCharacters {
            ids[piece] = pieces.count
            pieces.append(piece)
            scores.append(0)   // rescored below, after the merges
        }
        let sortedWords = wordCounts.keys.sorted()
        var words = sortedWords.map { $0.unicodeScalars.map { ids[Array(String($0).utf8)]! } }
        let counts = sortedWords.map { wordCounts[$0]! }

        var pairs = PairTable()
        for (w, word) in words.enumerated() { pairs.add(word, weight: counts[w], word: w) }
        var mergeCount = 0
        while pieces.count < vocabSize, let (left, right) = pairs.best(pieces) {
            let merged = pieces[left] + pieces[right]
            let id: Int
            if let existing = ids[merged] { id = existing } else {
                id = pieces.count
                ids[merged] = id
                pieces.append(merged)
                mergeCount += 1
                scores.append(-Float(mergeCount))
            }
            for w in pairs.words(containing: left, right) {
                pairs.add(words[w], weight: -counts[w], word: nil)
                words[w] = Self.replace(left, right, with: id, in: words[w])
                pairs.add(words[w], weight: counts[w], word: w)
            }
            pairs.retire(left, right)
        }
        // Single characters rank below every merge: they are looked up, never merged into.
        for piece in newCharacters { scores[ids[piece]!] = -Float(mergeCount + 1) }
        return Tokenizer(pieces: pieces, scores: scores)
    }

    /// Splits text into training words: each space starts a word, other whitespace stands alone.
    static func words(_ text: String) -> [String] {
        var out: [String] = [], current = ""
        for scalar in text.unicodeScalars {
            if scalar == " " {
                if !current.isEmpty { out.append(current) }
                current = " "
            } else if scalar.properties.isWhitespace {
                if !current.isEmpty { out.append(current) }
                out.append(String(scalar))
                current = ""
            } else {
                current.unicodeScalars.append(scalar)
            }
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    static func replace(_ left: Int, _ right: Int, with id: Int, in word: [Int]) -> [Int] {
        var out: [Int] = []
        out.reserveCapacity(word.count)
        var i = 0
        while i < word.count {
            if i + 1 < word.count, word[i] == left, word[i + 1] == right {
                out.append(id)
                i += 2
            } else {
                out.append(word[i])
                i += 1
            }
        }
        return out
    }
}

/// Adjacent-pair counts over the corpus, and which words hold each pair.
private struct PairTable {
    struct Pair: Hashable { var left: Int, right: Int }
    private var counts: [Pair: Int] = [:]
    private var holders: [Pair: Set<Int>] = [:]

    mutating func add(_ word: [Int], weight: Int, word index: Int?) {
        guard word.count > 1 else { return }
        for i in 0 ..< word.count - 1 {
            let pair = Pair(left: word[i], right: word[i + 1])
            counts[pair, default: 0] += weight
            if let index { holders[pair, default: []].insert(index) }
        }
    }

    /// The most frequent pair; ties go to the pair whose pieces' bytes sort first.
    func best(_ pieces: [[UInt8]]) -> (Int, Int)? {
        var best: (Pair, Int)?
        for (pair, count) in counts where count > 0 {
            guard let (b, bc) = best else { best = (pair, count); continue }
            if count > bc || (count == bc && Self.precedes(pair, b, pieces)) { best = (pair, count) }
        }
        return best.map { ($0.0.left, $0.0.right) }
    }

    func words(containing left: Int, _ right: Int) -> [Int] {
        (holders[Pair(left: left, right: right)] ?? []).sorted()
    }

    mutating func retire(_ left: Int, _ right: Int) {
        counts[Pair(left: left, right: right)] = nil
        holders[Pair(left: left, right: right)] = nil
    }

    private static func precedes(_ a: Pair, _ b: Pair, _ pieces: [[UInt8]]) -> Bool {
        let ka = pieces[a.left] + [0] + pieces[a.right], kb = pieces[b.left] + [0] + pieces[b.right]
        return ka.lexicographicallyPrecedes(kb)
    }
}
