import Foundation
import LMRuntime
import LMTestSupport
import Testing

/// Inputs that pass `validate()` but would exhaust memory when run get a typed error naming the
/// numbers before anything is allocated; a cache that cannot grow throws instead of trapping.
struct ResourceLimitTests {
    static let gigabyte = 1_000_000_000

    /// 1,000 thin layers over a 1,048,576-token context: 28M parameters (validate() accepts it), but
    /// one full-context K/V would be 512 GB (this shape once aborted the process at its first session).
    static let deepLongConfig = ModelConfig(name: "deep-long", dim: 64, hiddenDim: 64, layerCount: 1000, headCount: 1,
                                            kvHeadCount: 1, vocabSize: 300, contextLength: 1 << 20, weights: .synthetic(seed: 1))

    @Test func synthetic_refusesAConfigWhoseContextWouldNotFit() throws {
        try Self.deepLongConfig.validate()
        let estimate = Self.deepLongConfig.resourceEstimate()
        #expect(estimate.contextKVBytes == 2 * 1000 * 64 * (1 << 20) * 4)
        do {
            _ = try ModelWeights.synthetic(Self.deepLongConfig, seed: 1, memoryLimit: 64 * Self.gigabyte)
            Issue.record("a 512 GB context was accepted")
        } catch let ModelLoadError.exceedsMemoryLimit(reported, limit) {
            #expect(reported == estimate && limit == 64 * Self.gigabyte)
            let message = ModelLoadError.exceedsMemoryLimit(reported, limitBytes: limit).description
            #expect(message == "running the model needs weights 383 MB + scratch \(reported.scratchBytes / 1_000_000) MB + "
                + "full-context K/V 536870 MB = \(reported.totalBytes / 1_000_000) MB, more than the limit of 64000 MB "
                + "(MemoryLimit.bytes); most of it is K/V for the whole context: give the model fewer positions "
                + "(contextLength:, kvbench --context)", "\(message)")
            // Where the weights are the larger part, no such advice.
            var weighty = reported
            weighty.weightBytes = 2 * reported.contextKVBytes
            #expect(!ModelLoadError.exceedsMemoryLimit(weighty, limitBytes: limit).description.contains("fewer positions"))
        }
    }

    @Test func checkpoint_refusesAHeaderWithAContextThatWouldNotFit() throws {
        // A valid small checkpoint whose header claims a 1M-token context: the file is ~140 KB,
        // running it would need 268 MB of K/V and 32 MB of RoPE tables. With a 128 MB limit it is
        // refused before anything is allocated.
        var config = Fixtures.tinyConfig(contextLength: 64)
        let small = try ModelWeights.synthetic(config, seed: 3)
        config.contextLength = 1 << 20
        var data = try small.checkpointData()
        let seqLen = Int32(config.contextLength)
        data.replaceSubrange(24 ..< 28, with: (0 ..< 4).map { UInt8(truncatingIfNeeded: seqLen >> (8 * $0)) })
        let url = Fixtures.temporaryFile("long-context.bin")
        try data.write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        #expect(throws: ModelLoadError.self) { try ModelWeights.checkpoint(at: url, memoryLimit: 128 << 20) }
        do { _ = try ModelWeights.checkpoint(at: url, memoryLimit: 128 << 20) } catch let error as ModelLoadError {
            guard case .exceedsMemoryLimit = error else { Issue.record("\(error)"); return }
        }
    }

    @Test func baseWithAMillionTokenContext_isRefusedAndItsScratchFollowsTheBatch() throws {
        var base = try Fixtures.bundledCatalog.config(named: "base")
        let normal = base.resourceEstimate()
        base.contextLength = 1 << 20
        let long = base.resourceEstimate()
        // Scratch is sized by the batch and one tile of keys: the context does not change it.
        #expect(long.scratchBytes == normal.scratchBytes)
        func scratch(_ context: Int) -> Int {
            AttentionScratch(headCount: 12, kvHeadCount: 4, headDim: 64, contextLength: context, workers: 2).byteCount
        }
        #expect(scratch(1 << 20) == scratch(4096))
        let blocked = 2 * 3 * Kernels.attentionBlockRows * (Kernels.attentionKeyTile + 2 * 64 + 2)   // per worker: scores, queries, outputs, stats
        let partRows = 4 * Kernels.attentionParts * 3 * Kernels.fewQueryLimit                      // per K/V head and part: outputs and stats
        let partWork = 2 * (4 * 3 * Kernels.fewQueryLimit * 64 + (3 * Kernels.fewQueryLimit + 64) * Kernels.fewQueryKeyTile)
        #expect(scratch(4096) == (blocked + partRows * (64 + 2) + partWork) * 4)
        #expect(long.contextKVBytes == 2 * 12 * 256 * (1 << 20) * 4)
        #expect(throws: ModelLoadError.self) { try ModelWeights.synthetic(base, seed: 42, memoryLimit: 16 * Self.gigabyte) }
    }

    @Test func estimate_saturatesInsteadOfOverflowing() {
        let absurd = ModelConfig(name: "absurd", dim: 1 << 30, hiddenDim: 1 << 30, layerCount: 1 << 30, headCount: 2,
                                 kvHeadCount: 1, vocabSize: 1 << 30, contextLength: 1 << 20, weights: .synthetic(seed: 1))
        #expect(absurd.resourceEstimate().totalBytes == .max)
        #expect(throws: ModelLoadError.self) { try absurd.checkResources(limit: .max - 1) }
    }

    @Test func growingCache_reportsAFailedGrowthAndKeepsItsRows() throws {
        // One chunk fits; growing to the capacity would need 8 TB.
        let cache = GrowingKVCache(layerCount: 1, kvDim: 1 << 20, capacity: 1 << 20, chunkPositions: 1)
        Kernels.fill(cache.keys(layer: 0).rows(0 ..< 1), with: 3)
        cache.append([7])
        #expect(throws: RuntimeError.self) { try cache.reserve(positions: 1 << 20) }
        #expect(cache.tokens == [7] && cache.allocatedPositions == 1)
        #expect(cache.keys(layer: 0)[0, 5] == 3)
        #expect(throws: RuntimeError.allocationFailed(bytes: .max)) { try FloatBuffer(checkedCount: -1) }
    }

    /// A cache that refuses to grow: the forward pass throws before computing, the cache unchanged.
    @Test func forward_throwsWhenTheCacheCannotGrow() throws {
        final class Refusing: KVCache {
            let inner: DenseKVCache
            init(_ inner: DenseKVCache) { self.inner = inner }
            var layerCount: Int { inner.layerCount }
            var kvDim: Int { inner.kvDim }
            var capacity: Int { inner.capacity }
            var tokens: [Int] { inner.tokens }
            func keys(layer: Int) -> Matrix { inner.keys(layer: layer) }
            func values(layer: Int) -> Matrix { inner.values(layer: layer) }
            func append(_ tokens: ArraySlice<Int>) { inner.append(tokens) }
            func truncate(to count: Int) { inner.truncate(to: count) }
            func reserve(positions: Int) throws {
                if positions > 3 { throw RuntimeError.allocationFailed(bytes: positions) }
            }
        }
        let model = Transformer(weights: Fixtures.tinyWeights())
        let cache = Refusing(model.makeCache())
        try model.forward([1, 2, 3], cache: cache)
        let before = cache.snapshotRows(0 ..< 3)
        #expect(throws: RuntimeError.allocationFailed(bytes: 5)) { try model.forward([4, 5], cache: cache) }
        #expect(cache.tokens == [1, 2, 3] && cache.snapshotRows(0 ..< 3) == before)
    }

    @Test func tokenizer_anAllEmptyVocabularyRoundTrips() throws {
        let empty = Tokenizer(pieces: Array(repeating: [UInt8](), count: 300), scores: Array(repeating: 0, count: 300))
        let loaded = try Tokenizer(serialized: empty.serialized(), vocabSize: 300, path: "empty.bin")
        #expect(loaded.vocabSize == 300 && loaded.serialized() == empty.serialized())
    }
}
