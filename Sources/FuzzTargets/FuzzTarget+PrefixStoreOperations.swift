import Foundation
import LMRuntime

extension FuzzTarget {
    /// Runs `data` as a program of prefix-store operations on the store fuzz model, trapping on
    /// any broken invariant (that is the finding). Each operation is a byte, then its operands:
    ///
    /// - publish: a length (1–24), the tokens (each byte mod 3, so prefixes part anywhere) and a
    ///   boundary stride; the sequence's rows are computed and published at every stride and at its end.
    /// - restore: a sequence as above and a count of tokens the cache holds already; the restored
    ///   cache must hold a prefix of the sequence, no further than its last boundary, whose rows
    ///   match a fresh prefill's.
    /// - pin / unpin: a published sequence (by index) cut at one of its boundaries.
    /// - clear: drops every unpinned entry.
    ///
    /// The store holds at most 40 positions' rows, so publishes evict and, beside pins, are refused.
    static func prefixStoreOperations(_ data: Data) {
        guard let weights = storeWeights, let model = storeModel, let fingerprint = storeFingerprint else { return }
        let config = weights.config
        let rowBytes = 2 * config.layerCount * config.kvDim * MemoryLayout<Float>.stride
        let store = PrefixStore(fingerprint: fingerprint, layerCount: config.layerCount, kvDim: config.kvDim,
                                configuration: .memoryOnly(memoryByteLimit: 40 * rowBytes))
        var input = data.makeIterator()
        func sequence() -> (tokens: [Int], boundaries: [Int])? {
            guard let length = input.next().map({ 1 + Int($0) % 24 }) else { return nil }
            var tokens: [Int] = []
            while tokens.count < length, let byte = input.next() { tokens.append(1 + Int(byte) % 3) }
            guard !tokens.isEmpty, let stride = input.next().map({ 1 + Int($0) % 8 }) else { return nil }
            return (tokens, Array(Swift.stride(from: stride, to: tokens.count, by: stride)) + [tokens.count])
        }
        func filled(_ tokens: [Int]) -> GrowingKVCache {
            let cache = GrowingKVCache(layerCount: config.layerCount, kvDim: config.kvDim, capacity: config.contextLength)
            if !tokens.isEmpty { try! model.forward(tokens, cache: cache) }   // fuzz model, valid tokens: cannot throw
            return cache
        }
        var published: [(tokens: [Int], boundaries: [Int])] = []
        var pins: [[Int]] = []
        while let operation = input.next() {
            switch operation % 5 {
            case 0:
                guard let s = sequence() else { break }
                store.publish(filled(s.tokens), boundaries: s.boundaries)
                published.append(s)
            case 1:
                guard let s = sequence(), let held = input.next().map({ Int($0) % s.tokens.count }) else { break }
                let cache = filled(Array(s.tokens.prefix(held)))
                let restored = store.restore(into: cache, tokens: s.tokens, boundaries: s.boundaries)
                precondition(cache.tokens == Array(s.tokens.prefix(cache.count)), "a restore left tokens that are not the sequence's")
                precondition(cache.count == held + restored.total, "a restore's count disagrees with the cache")
                precondition(restored.total == 0 || cache.count <= s.boundaries.last!, "a restore went past the last boundary")
                checkRows(cache, against: filled(cache.tokens))
            case 2, 3:
                guard !published.isEmpty, let pick = input.next(), let cut = input.next() else { break }
                let s = published[Int(pick) % published.count]
                let prefix = Array(s.tokens.prefix(s.boundaries[Int(cut) % s.boundaries.count]))
                if operation % 5 == 2 {
                    if store.pin(prefix) { pins.append(prefix) }
                } else if let index = pins.firstIndex(of: prefix) {
                    precondition(store.unpin(prefix), "a pinned prefix would not unpin")
                    pins.remove(at: index)
                } else {
                    precondition(!store.unpin(prefix), "a prefix never pinned unpinned")
                }
            default:
                store.removeAll()
            }
            if let violation = store.checkInvariants() { preconditionFailure("prefix store: \(violation)") }
            let statistics = store.statistics
            precondition(statistics.readerCount == 0, "a reader was left behind")
            // Every pin keeps its prefix stored (the whole prefix, through eviction and splits).
            for prefix in pins {
                precondition(store.storedPrefixLength(of: prefix, boundaries: [prefix.count]) == prefix.count, "a pinned prefix was evicted")
            }
        }
    }

    /// The store fuzz model's transformer, made once (its scratch is per transformer), with
    /// batches as long as the operations' sequences.
    static let storeModel = storeWeights.map { Transformer(weights: $0, maxBatch: 24) }

    /// Traps unless `cache`'s rows equal `fresh`'s within a small relative tolerance (the two
    /// came from passes over different batches, so their sums may round differently).
    static func checkRows(_ cache: GrowingKVCache, against fresh: GrowingKVCache) {
        for layer in 0 ..< cache.layerCount {
            for (mine, theirs) in [(cache.keys(layer: layer), fresh.keys(layer: layer)), (cache.values(layer: layer), fresh.values(layer: layer))] {
                for row in 0 ..< cache.count {
                    for column in 0 ..< mine.cols {
                        let a = mine[row, column], b = theirs[row, column]
                        precondition(abs(a - b) <= 1e-4 * max(1, abs(b)), "restored row \(row) differs from a fresh prefill's")
                    }
                }
            }
        }
    }
}
