import LMRuntime

/// Computes, before every generated token, which tokens keep the output a valid prefix of
/// the schema's JSON and leave enough budget to finish it.
///
/// **Budget rule.** With `r` tokens left (this one included), a token is allowed only when
/// the shortest completion after it takes at most `r - 1` bytes. Every byte exists as a
/// single token, so that completion always fits, and some token (the next byte of the
/// current shortest completion) is always allowed: a response is never malformed and never
/// fails for lack of budget. Strings end early and arrays stop at their minimum count when
/// the budget gets tight; earlier values are not shortened to make room for later ones.
///
/// **Speed.** The tokens a frame accepts without being closed depend only on the frame
/// itself, so they are classified once per frame state and cached (a free string's content
/// state is one entry for the whole response); only tokens that close the frame (a quote,
/// a `,` after a number...) are checked against the full state each time.
final class TokenMasker: @unchecked Sendable {  // lent to one request at a time (GrammarCache)
    let grammar: SchemaGrammar
    let vocabulary: TokenVocabulary

    struct Entry {
        /// Tokens the frame takes without closing, as a bit set.
        var inside: [UInt64]
        /// The same tokens with the bytes each leaves to finish the frame.
        var insideTokens: [(token: Int32, remaining: Int)]
        var maximumInsideRemaining: Int
        /// Tokens that close the frame, by first byte; checked against the full state, a
        /// whole group skipped at once when the state refuses its first byte.
        var closing: [(first: UInt8, tokens: [Int32])]
    }

    private var cache: [GrammarState.Frame: Entry] = [:]
    static let cacheLimit = 4096

    init(grammar: SchemaGrammar, vocabulary: TokenVocabulary) {
        self.grammar = grammar
        self.vocabulary = vocabulary
    }

    /// Sets `mask` (one bit per token) to the tokens allowed in `state` with `budget` tokens left.
    /// Never empty while `state` is unfinished and `budget ≥ state.remaining`.
    func mask(_ state: GrammarState, budget: Int, into mask: inout [UInt64]) {
        for i in mask.indices { mask[i] = 0 }
        guard let top = state.top, budget > 0 else { return }
        var key = top
        key.below = 0
        let entry = cache[key] ?? build(key, caching: Self.isWorthCaching(key, grammar))
        let room = budget - 1 - top.below
        if entry.maximumInsideRemaining <= room {
            for i in mask.indices { mask[i] = entry.inside[i] }
        } else {
            for (t, r) in entry.insideTokens where r <= room { mask[Int(t) >> 6] |= 1 << UInt64(t & 63) }
        }
        for (first, tokens) in entry.closing {
            var probe = state
            guard probe.feed(first) else { continue }
            for t in tokens {
                var s = state
                if s.feed(vocabulary.bytes[Int(t)]), s.remaining <= budget - 1 { mask[Int(t) >> 6] |= 1 << UInt64(t & 63) }
            }
        }
    }

    /// A number's state holds its value, so it seldom recurs: not worth a cache entry.
    static func isWorthCaching(_ frame: GrammarState.Frame, _ grammar: SchemaGrammar) -> Bool {
        if case .numbers = grammar.nodes[frame.node] { return false }
        return true
    }

    private func build(_ frame: GrammarState.Frame, caching: Bool) -> Entry {
        var entry = Entry(inside: [UInt64](repeating: 0, count: vocabulary.wordCount), insideTokens: [],
                          maximumInsideRemaining: 0, closing: [])
        for first in 0 ..< 256 {
            let candidates = vocabulary.byFirstByte[first]
            guard !candidates.isEmpty else { continue }
            var probe = GrammarState(grammar, isolating: frame)
            let accepted = probe.feed(UInt8(first))
            if !accepted, !probe.isFinished { continue }
            if probe.isFinished {
                // The first byte already closes the frame: the whole group depends on the state below.
                entry.closing.append((UInt8(first), candidates))
                continue
            }
            var closing: [Int32] = []
            for t in candidates {
                var s = GrammarState(grammar, isolating: frame)
                var refused = false
                for c in vocabulary.bytes[Int(t)] where !s.feed(c) || s.isFinished {
                    refused = true
                    break
                }
                if s.isFinished {
                    closing.append(t)
                } else if !refused {
                    let r = s.remaining
                    entry.inside[Int(t) >> 6] |= 1 << UInt64(t & 63)
                    entry.insideTokens.append((t, r))
                    entry.maximumInsideRemaining = max(entry.maximumInsideRemaining, r)
                }
            }
            if !closing.isEmpty { entry.closing.append((UInt8(first), closing)) }
        }
        guard caching else { return entry }
        if cache.count >= Self.cacheLimit { cache.removeAll(keepingCapacity: true) }
        cache[frame] = entry
        return entry
    }
}
