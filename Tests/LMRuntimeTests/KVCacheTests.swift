import LMRuntime
import LMTestSupport
import PropertyBased
import Testing

/// The KVCache contract and the cache-exactness invariant (DESIGN.md), against every conformer.
struct KVCacheTests {
    /// Every KVCache conformer, built for a model.
    static let factories: [(String, @Sendable (Transformer, Int) -> any KVCache)] = [
        ("DenseKVCache", { model, capacity in model.makeCache(capacity: capacity) }),
        ("GrowingKVCache", { model, capacity in
            GrowingKVCache(layerCount: model.config.layerCount, kvDim: model.config.kvDim, capacity: capacity, chunkPositions: 7)
        }),
    ]
    static let names = factories.map(\.0)

    static func make(_ name: String, _ model: Transformer, capacity: Int = 96) -> any KVCache {
        factories.first { $0.0 == name }!.1(model, capacity)
    }

    let model = Transformer(weights: Fixtures.tinyWeights())

    func expectExact(_ cache: any KVCache, _ note: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws {
        let deviation = try cache.deviationFromFreshPrefill(model)
        #expect(deviation.maxRelativeError <= 1e-4, "\(note) \(deviation)", sourceLocation: sourceLocation)
    }

    @Test(arguments: names)
    func append_recordsTokensInOrder(_ name: String) throws {
        let cache = Self.make(name, model)
        #expect(cache.count == 0 && cache.tokens.isEmpty)
        try model.forward([5, 6, 7], cache: cache)
        try expectExact(cache)
        try model.forward([8], cache: cache)
        try expectExact(cache)
        #expect(cache.tokens == [5, 6, 7, 8])
        #expect(cache.bytesPerToken == 2 * model.config.layerCount * model.config.kvDim * 4)
    }

    @Test(arguments: names)
    func truncate_keepsRowsBeforeBoundaryBitForBit(_ name: String) throws {
        let tokens = Fixtures.tokens(count: 20, vocabSize: model.config.vocabSize, seed: 1)
        for p in [0, 1, 2, 3, 5, 8, 13, 19, 20] {
            let cache = Self.make(name, model)
            try model.forward(tokens, cache: cache)
            let before = cache.snapshotRows(0 ..< p)
            cache.truncate(to: p)
            #expect(cache.tokens == Array(tokens.prefix(p)))
            #expect(cache.snapshotRows(0 ..< p) == before)
            try expectExact(cache, "after truncate(to: \(p))")
        }
    }

    @Test func growingCache_growsInChunksAndKeepsRows() throws {
        let cache = GrowingKVCache(layerCount: model.config.layerCount, kvDim: model.config.kvDim, capacity: 40, chunkPositions: 16)
        #expect(cache.allocatedPositions == 16)
        try model.forward(Fixtures.tokens(count: 10, vocabSize: model.config.vocabSize, seed: 4), cache: cache)
        let before = cache.snapshotRows(0 ..< 10)
        try model.forward(Fixtures.tokens(count: 9, vocabSize: model.config.vocabSize, seed: 5), cache: cache)
        #expect(cache.allocatedPositions == 32 && cache.snapshotRows(0 ..< 10) == before)
        try model.forward(Fixtures.tokens(count: 21, vocabSize: model.config.vocabSize, seed: 6), cache: cache)
        #expect(cache.allocatedPositions == 40 && cache.count == 40)
        try expectExact(cache)
        #expect(throws: RuntimeError.contextOverflow(cachedTokens: 40, newTokens: 1, capacity: 40)) {
            try model.forward([1], cache: cache)
        }
    }

    @Test(arguments: names)
    func truncate_outOfRangeClamps(_ name: String) throws {
        let cache = Self.make(name, model)
        try model.forward([1, 2, 3], cache: cache)
        cache.truncate(to: 10)
        #expect(cache.tokens == [1, 2, 3])
        cache.truncate(to: -4)
        #expect(cache.tokens.isEmpty)
        try expectExact(cache)
    }

    @Test(arguments: names)
    func truncate_thenRefillEqualsFreshPrefill(_ name: String) throws {
        let tokens = Fixtures.tokens(count: 24, vocabSize: model.config.vocabSize, seed: 2)
        let fresh = Self.make(name, model)
        let expected = try model.forward(tokens, cache: fresh).toArray()
        for p in [0, 1, 2, 3, 5, 11, 23] {
            let cache = Self.make(name, model)
            try model.forward(tokens, cache: cache)
            cache.truncate(to: p)
            let logits = try model.forward(Array(tokens[p...]), cache: cache).toArray()
            #expect(Fixtures.maxRelativeError(logits, expected) <= 1e-4, "refill from \(p)")
            try expectExact(cache)
        }
    }

    /// A change at position p keeps exactly the tokens before p; an append keeps all.
    @Test(arguments: names)
    func commonPrefixLength_marksTheInvalidationBoundary(_ name: String) throws {
        let tokens = Fixtures.tokens(count: 16, vocabSize: model.config.vocabSize, seed: 3)
        let cache = Self.make(name, model)
        try model.forward(tokens, cache: cache)
        #expect(cache.commonPrefixLength(with: tokens + [9, 9]) == 16)
        for p in [0, 1, 7, 15] {
            var edited = tokens
            edited[p] = (edited[p] + 1) % model.config.vocabSize
            #expect(cache.commonPrefixLength(with: edited) == p)
        }
        #expect(cache.commonPrefixLength(with: []) == 0)
    }

    /// Random append/truncate sequences keep the cache equal to a fresh prefill of its tokens.
    @Test(arguments: names)
    func randomAppendTruncateSequences_keepCacheExact(_ name: String) async {
        let model = self.model
        let vocab = model.config.vocabSize
        await propertyCheck(count: 25, input: Gen.int(in: 0 ... 1_000_000).array(of: 1 ... 10)) { operations in
            let cache = Self.make(name, model, capacity: 96)
            for op in operations {
                if op % 3 == 0 {
                    cache.truncate(to: op % (cache.count + 1))
                } else {
                    let n = min(1 + op % 9, cache.capacity - cache.count)
                    guard n > 0 else { continue }
                    try model.forward(Fixtures.tokens(count: n, vocabSize: vocab, seed: UInt64(op)), cache: cache)
                }
                let deviation = try cache.deviationFromFreshPrefill(model)
                #expect(deviation.maxRelativeError <= 1e-4, "\(operations): \(deviation)")
            }
        }
    }
}
