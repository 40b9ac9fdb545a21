import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// The shared prefix store: exact rows on every hit, a tree of shared spans, limits, pins, and
/// the disk tier's validation. `checkInvariants()` runs after every mutation.
struct PrefixStoreTests {
    let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(contextLength: 128))
    var model: Transformer { Transformer(weights: weights) }
    var rowBytes: Int { 2 * weights.config.layerCount * weights.config.kvDim * 4 }

    func tokens(_ count: Int, seed: UInt64) -> [Int] {
        Fixtures.tokens(count: count, vocabSize: weights.config.vocabSize, seed: seed)
    }

    /// A cache holding a fresh prefill of `tokens`.
    func filled(_ tokens: [Int], on model: Transformer) throws -> GrowingKVCache {
        let cache = GrowingKVCache(layerCount: weights.config.layerCount, kvDim: weights.config.kvDim,
                                   capacity: weights.config.contextLength, chunkPositions: 16)
        try model.forward(tokens, cache: cache)
        return cache
    }

    func emptyCache() -> GrowingKVCache {
        GrowingKVCache(layerCount: weights.config.layerCount, kvDim: weights.config.kvDim,
                       capacity: weights.config.contextLength, chunkPositions: 16)
    }

    func store(limit: Int = 1 << 30, directory: URL? = nil, key: PrefixStore.EncryptionKey? = nil) -> PrefixStore {
        let configuration = directory.map { PrefixStore.Configuration.persistent(in: $0, memoryByteLimit: limit, encryptionKey: key) }
            ?? .memoryOnly(memoryByteLimit: limit)
        return PrefixStore(weights: weights, configuration: configuration)
    }

    /// Restores into an empty cache, prefills the rest, and returns how far the logits and rows
    /// are from a fresh prefill of `tokens` (the cache-exactness invariant).
    func restoreAndCompare(_ store: PrefixStore, _ tokens: [Int], boundaries: [Int], have: Int = 0) throws
        -> (restored: PrefixStore.Restored, logitError: Float, rowError: Float) {
        let model = model
        let cache = have > 0 ? try filled(Array(tokens.prefix(have)), on: model) : emptyCache()
        let restored = store.restore(into: cache, tokens: tokens, boundaries: boundaries)
        #expect(cache.tokens == Array(tokens.prefix(cache.count)))
        let logits = try model.forward(Array(tokens[cache.count...]), cache: cache).toArray()
        let fresh = try model.forward(tokens, cache: model.makeCache()).toArray()
        return (restored, Fixtures.maxRelativeError(logits, fresh), try cache.deviationFromFreshPrefill(model).maxRelativeError)
    }

    @Test(arguments: [0, 1, 7, 20])
    func restore_fromMemoryGivesTheLogitsOfAFreshPrefill(have: Int) throws {
        let store = store()
        let sequence = tokens(60, seed: 1)
        store.publish(try filled(Array(sequence.prefix(45)), on: model), boundaries: [20, 45])
        #expect(store.checkInvariants() == nil)
        let (restored, logitError, rowError) = try restoreAndCompare(store, sequence, boundaries: [10, 20, 45, 55], have: have)
        #expect(restored == PrefixStore.Restored(fromMemory: 45 - have, fromDisk: 0))
        #expect(logitError <= 1e-4 && rowError <= 1e-4)
        #expect(store.statistics.memoryHits == 1 && store.statistics.readerCount == 0)
    }

    @Test func restore_usesStoredRowsAsFarAsTheirTokensMatch() throws {
        let store = store()
        let sequence = tokens(50, seed: 2), vocabulary = weights.config.vocabSize
        store.publish(try filled(sequence, on: model), boundaries: [30])
        var other = sequence, unrelated = sequence
        other[25] = (other[25] + 1) % vocabulary           // differs inside the stored entry
        unrelated[0] = (unrelated[0] + 1) % vocabulary
        let cases: [(tokens: [Int], boundaries: [Int], restored: Int, partial: Bool)] = [
            (other, [30, 40], 25, true),                    // as far as the tokens match
            (sequence, [25, 40], 30, false),                // the whole entry, though 30 is not a boundary here
            (sequence, [10, 20], 20, true),                 // never beyond the last boundary
            (Array(sequence.prefix(30)) + [7], [30], 30, false),
            (unrelated, [30, 40], 0, false),
        ]
        for c in cases {
            let before = store.statistics.partialHits
            let (restored, logitError, rowError) = try restoreAndCompare(store, c.tokens, boundaries: c.boundaries)
            #expect(restored == PrefixStore.Restored(fromMemory: c.restored, fromDisk: 0))
            #expect(logitError <= 1e-4 && rowError <= 1e-4)
            #expect(store.statistics.partialHits - before == (c.partial ? 1 : 0))
            #expect(store.checkInvariants() == nil && store.statistics.readerCount == 0)
        }
    }

    @Test(arguments: [0, 25])
    func restore_followsTheBranchThatMatchesLongest(have: Int) throws {
        let store = store()
        let shared = tokens(20, seed: 3), a = tokens(15, seed: 4), b = tokens(25, seed: 5)
        store.publish(try filled(shared + a, on: model), boundaries: [20, 35])
        store.publish(try filled(shared + b, on: model), boundaries: [20, 45])
        var diverging = shared + b + tokens(5, seed: 6)
        diverging[32] = (diverging[32] + 1) % weights.config.vocabSize
        let cases: [(tokens: [Int], restored: Int)] = [
            (diverging, 32),                                 // through the shared entry, then part of b's
            (shared + b + tokens(5, seed: 7), 45),           // all of b's branch
            (shared + a + tokens(20, seed: 8), 35),          // all of a's, though 35 is not a boundary
        ]
        for c in cases {
            let (restored, logitError, rowError) = try restoreAndCompare(store, c.tokens, boundaries: [c.tokens.count - 1], have: have)
            #expect(restored == PrefixStore.Restored(fromMemory: c.restored - have, fromDisk: 0))
            #expect(logitError <= 1e-4 && rowError <= 1e-4)
            #expect(store.checkInvariants() == nil && store.statistics.readerCount == 0)
        }
    }

    /// Random publishes of sequences over a four-token alphabet (so they share prefixes of every
    /// length) into a store small enough to evict, each followed by a restore of a random query:
    /// what comes from memory is exactly the longest common prefix of the query with any entry
    /// held, up to the last boundary, and the rows give a fresh prefill's logits.
    @Test func restore_takesTheLongestCommonPrefixWithAnyEntryHeld() throws {
        let store = store(limit: 150 * rowBytes), model = model
        var rng = SeededGenerator(seed: 42)
        func sequence() -> [Int] { (0 ..< Int.random(in: 8 ... 40, using: &rng)).map { _ in Int.random(in: 0 ..< 4, using: &rng) } }
        func boundaries(_ count: Int) -> [Int] {
            (1 ... count).filter { $0 == count || Int.random(in: 0 ..< 4, using: &rng) == 0 }
        }
        var published: [[Int]] = []
        for round in 0 ..< 40 {
            let tokens = Int.random(in: 0 ..< 3, using: &rng) == 0 || published.isEmpty ? sequence() : {
                var t = published.randomElement(using: &rng)!   // an earlier one, changed from a random point on
                let cut = Int.random(in: 0 ... t.count, using: &rng)
                t.replaceSubrange(cut..., with: sequence().prefix(Int.random(in: 0 ... 20, using: &rng)))
                return t.isEmpty ? [1] : t
            }()
            store.publish(try filled(tokens, on: model), boundaries: boundaries(tokens.count))
            published.append(tokens)
            #expect(store.checkInvariants() == nil)

            let query = Int.random(in: 0 ..< 2, using: &rng) == 0 ? sequence() : published.randomElement(using: &rng)! + sequence()
            let queryBoundaries = boundaries(query.count - 1 > 0 ? query.count - 1 : 1).filter { $0 < query.count }
            let held = store.state.withLock { $0.entries.values.map(\.tokens) }
            let limit = queryBoundaries.last ?? 0
            let longest = held.map { zip($0, query.prefix(limit)).prefix { $0 == $1 }.count }.max() ?? 0
            let cache = emptyCache()
            let restored = store.restore(into: cache, tokens: query, boundaries: queryBoundaries)
            #expect(restored == PrefixStore.Restored(fromMemory: longest, fromDisk: 0), "round \(round)")
            #expect(store.checkInvariants() == nil && store.statistics.readerCount == 0)
            if round % 8 == 0, restored.total > 0 {
                let logits = try model.forward(Array(query[cache.count...]), cache: cache).toArray()
                let fresh = try model.forward(query, cache: model.makeCache()).toArray()
                #expect(Fixtures.maxRelativeError(logits, fresh) <= 1e-4)
            }
        }
        #expect(store.statistics.evictions > 0 && store.statistics.partialHits > 0)
    }

    @Test func publish_storesASharedPrefixOnce() throws {
        let store = store()
        let shared = tokens(20, seed: 3)
        let a = shared + tokens(15, seed: 4), b = shared + tokens(25, seed: 5)
        store.publish(try filled(a, on: model), boundaries: [20, 35])
        store.publish(try filled(b, on: model), boundaries: [20, 45])
        #expect(store.checkInvariants() == nil)
        #expect(store.statistics.entryCount == 3)
        #expect(store.statistics.byteCount == (20 + 15 + 25) * rowBytes)
        for sequence in [a, b] {
            let (restored, logitError, rowError) = try restoreAndCompare(store, sequence + [1], boundaries: [20, sequence.count])
            #expect(restored.fromMemory == sequence.count && logitError <= 1e-4 && rowError <= 1e-4)
        }
    }

    /// A prefix that parts from a stored entry inside it splits the entry there: the rows both
    /// share are held once, and every prefix still restores exactly.
    @Test(arguments: [25, 20])
    func publish_splitsAnEntryWhereAnotherPrefixPartsFromIt(agreeing: Int) throws {
        let store = store()
        let a = tokens(30, seed: 30)
        var b = a + tokens(5, seed: 31)
        b[agreeing] = (b[agreeing] + 1) % weights.config.vocabSize
        store.publish(try filled(a, on: model), boundaries: [30])
        #expect(store.pin(a))
        store.publish(try filled(b, on: model), boundaries: [20, 35])   // at 20: the head itself, or a part of it
        #expect(store.checkInvariants() == nil)
        let heads = agreeing > 20 ? [20, agreeing] : [20]
        #expect(store.statistics.splits == heads.count && store.statistics.entryCount == heads.count + 2)
        #expect(store.statistics.byteCount == (30 + 35 - agreeing) * rowBytes)   // each position's rows once
        #expect(store.statistics.pinnedEntryCount == 1)   // the pin moved with the key to a's tail
        for (sequence, boundaries) in [(a, [30]), (b, [35]), (Array(b.prefix(20)), [20])] {
            let (restored, logitError, rowError) = try restoreAndCompare(store, sequence + [1], boundaries: boundaries)
            #expect(restored == PrefixStore.Restored(fromMemory: sequence.count, fromDisk: 0))
            #expect(logitError <= 1e-4 && rowError <= 1e-4)
            #expect(store.checkInvariants() == nil && store.statistics.readerCount == 0)
        }
        #expect(store.storedPrefixLength(of: b, boundaries: heads) == heads.last)
        #expect(store.unpin(a) && !store.unpin(a))
        store.removeAll()
        #expect(store.statistics.entryCount == 0 && store.checkInvariants() == nil)
    }

    /// Splits while other threads restore through the entries being split: every restore still
    /// gets all the rows, exactly (a reader copies from the entry object it acquired, which the
    /// split leaves alive), and the tree stays valid.
    @Test func publish_splitsWhileOtherThreadsRestoreThroughTheSameEntries() throws {
        let store = store(), model = model
        let a = tokens(40, seed: 36)
        store.publish(try filled(a, on: model), boundaries: [40])
        let variants = (1 ..< 40).reversed().map { k in   // each parts from `a` one token earlier
            var v = a
            v[k] = (v[k] + 1) % weights.config.vocabSize
            return v
        }
        let results = Locked<[(restored: Int, error: Float)]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            if worker == 0 {
                for v in variants { store.publish(try! filled(v, on: model), boundaries: [40]) }
                return
            }
            for _ in 0 ..< 20 {
                let cache = emptyCache()
                let restored = store.restore(into: cache, tokens: a + [1], boundaries: [40]).fromMemory
                let error = (try? cache.deviationFromFreshPrefill(model).maxRelativeError) ?? .infinity
                results.withLock { $0.append((restored, error)) }
            }
        }
        #expect(results.withLock { $0.allSatisfy { $0.restored == 40 && $0.error <= 1e-4 } })
        #expect(store.statistics.splits == 39 && store.statistics.readerCount == 0)
        #expect(store.statistics.byteCount == (40 + (1 ... 39).reduce(0, +)) * rowBytes)   // variant k adds rows k..<40 only
        #expect(store.checkInvariants() == nil)
    }

    @Test func publish_evictsLeastRecentlyUsedLeavesWithinTheLimit() throws {
        let store = store(limit: 50 * rowBytes)
        let sequences = (0 ..< 4).map { tokens(20, seed: 10 + UInt64($0)) }
        for (i, sequence) in sequences.enumerated() {
            store.publish(try filled(sequence, on: model), boundaries: [20])
            #expect(store.checkInvariants() == nil)
            #expect(store.statistics.byteCount <= 50 * rowBytes)
            if i == 1 || i == 2 { _ = try restoreAndCompare(store, sequences[0] + [1], boundaries: [20]) }   // 0 is used again
        }
        // Two fit: 0 (used after every publish) and 3 (newest); 1 then 2 were least recently used.
        #expect(store.statistics.evictions == 2)
        let stored = sequences.map { store.storedPrefixLength(of: $0, boundaries: [20]) }
        #expect(stored == [20, 0, 0, 20])
    }

    @Test func pin_keepsAnEntryAndRefusesWhatDoesNotFit() throws {
        let store = store(limit: 40 * rowBytes)
        let first = tokens(20, seed: 20), second = tokens(20, seed: 21), third = tokens(20, seed: 22)
        store.publish(try filled(first, on: model), boundaries: [20])
        #expect(store.pin(first) && store.pin(first))
        #expect(!store.pin(Array(first.prefix(10))))            // no entry for exactly these tokens
        store.publish(try filled(second, on: model), boundaries: [20])
        store.publish(try filled(third, on: model), boundaries: [20])   // evicts second, never the pinned first
        #expect(store.checkInvariants() == nil)
        #expect(store.storedPrefixLength(of: first, boundaries: [20]) == 20)
        #expect(store.storedPrefixLength(of: second, boundaries: [20]) == 0)
        let big = tokens(30, seed: 23)
        #expect(store.pin(third))
        store.publish(try filled(big, on: model), boundaries: [30])     // 30 rows cannot fit beside two pins
        #expect(store.statistics.refusedInsertions == 1 && store.statistics.byteCount <= 40 * rowBytes)
        #expect(store.unpin(first) && store.unpin(first) && !store.unpin(first) && store.unpin(third))
        store.publish(try filled(big, on: model), boundaries: [30])
        #expect(store.storedPrefixLength(of: big, boundaries: [30]) == 30)
        #expect(store.storedPrefixLength(of: first, boundaries: [20]) == 0)
        #expect(store.checkInvariants() == nil)
    }

    /// Room for a new entry is never made by evicting the entry it extends (found by the
    /// session property test: the parent is a leaf until its child is in).
    @Test func publish_neverEvictsTheParentOfWhatItInserts() throws {
        let store = store(limit: 25 * rowBytes)
        let sequence = tokens(30, seed: 24)
        store.publish(try filled(Array(sequence.prefix(20)), on: model), boundaries: [20])
        store.publish(try filled(sequence, on: model), boundaries: [20, 30])   // needs 10 more rows: no room
        #expect(store.checkInvariants() == nil)
        #expect(store.statistics.refusedInsertions == 1 && store.statistics.evictions == 0)
        #expect(store.storedPrefixLength(of: sequence, boundaries: [20, 30]) == 20)
    }
}
