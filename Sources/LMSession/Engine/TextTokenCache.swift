import LMRuntime

/// Per model: the token ids of texts rendered before (instructions, tool definitions, prompts,
/// tool outputs), so that a request renders its history without tokenizing it again and only
/// new text is encoded. Every request renders the whole transcript; encoding it all again was
/// most of a turn's own work besides its passes.
///
/// Keyed by the text's UTF-8 bytes, not by the `String`: strings compare equal under canonical
/// equivalence (`é` as one scalar or as `e` and a combining accent), and those spellings
/// tokenize differently. Holds at most ``tokenLimit`` ids in all; an insertion past it
/// empties the cache first (the next requests fill it again with what they use).
final class TextTokenCache: Sendable {
    /// Ids the cache holds before it starts over: about 2 MB of ids, many long conversations' worth.
    static let standardTokenLimit = 1 << 18

    let tokenLimit: Int
    private let tokenizer: Tokenizer
    /// Behind `Locked`, not `Mutex`: ThreadSanitizer sees an `NSLock`'s ordering (see `Locked`).
    private let slot = Locked<(entries: [[UInt8]: [Int]], tokens: Int, hits: Int, misses: Int)>(([:], 0, 0, 0))

    init(tokenizer: Tokenizer, tokenLimit: Int = standardTokenLimit) {
        self.tokenizer = tokenizer
        self.tokenLimit = tokenLimit
    }

    /// `text`'s ids, exactly `tokenizer.encode(text, bos: false)`.
    func tokens(_ text: String) -> [Int] {
        let key = Array(text.utf8)
        if let hit = slot.withLock({ s -> [Int]? in
            let hit = s.entries[key]
            if hit != nil { s.hits += 1 }
            return hit
        }) { return hit }
        let ids = tokenizer.encode(text, bos: false)   // outside the lock: other sessions keep rendering
        slot.withLock { s in
            s.misses += 1
            if s.tokens + ids.count > tokenLimit { (s.entries, s.tokens) = ([:], 0) }
            if s.entries.updateValue(ids, forKey: key) == nil { s.tokens += ids.count }
        }
        return ids
    }

    /// Texts found and texts encoded so far, and the ids held now (for tests).
    var counts: (hits: Int, misses: Int, tokens: Int) { slot.withLock { ($0.hits, $0.misses, $0.tokens) } }
}
