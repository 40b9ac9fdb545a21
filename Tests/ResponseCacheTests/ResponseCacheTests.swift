import Foundation
import ResponseCache
import Synchronization
import Testing

/// A generator that counts its runs and can be told to fail.
final class Generator: Sendable {
    private let state = Mutex((runs: 0, failing: false, version: 0))
    var runs: Int { state.withLock { $0.runs } }
    func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }
    func bump() { state.withLock { $0.version += 1 } }

    struct Failure: Error, CustomStringConvertible { var description: String { "model unavailable" } }

    func callAsFunction(_ name: String) async throws -> String {
        let (failing, version) = state.withLock { s -> (Bool, Int) in
            s.runs += 1
            return (s.failing, s.version)
        }
        try await Task.sleep(for: .milliseconds(2))   // a generation takes time, so callers overlap
        if failing { throw Failure() }
        return "\(name) v\(version)"
    }
}

func temporaryDirectory() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("response-cache-\(UUID().uuidString)")
}

struct CacheKeyTests {
    @Test func digest_isStableAndSensitiveToEveryPart() {
        let a = CacheKey(parts: ["model base", "instructions", "prompt"], dataFingerprint: "ids:1,2", tags: ["2026-11-21"])
        #expect(a.digest == CacheKey(parts: ["model base", "instructions", "prompt"], dataFingerprint: "ids:1,2").digest)
        #expect(a.digest.count == 64)
        #expect(a != CacheKey(parts: ["model base", "instructions", "prompt!"], dataFingerprint: "ids:1,2"))
        #expect(a != CacheKey(parts: ["model base", "instructions", "prompt"], dataFingerprint: "ids:1,3"))
        #expect(a != CacheKey(parts: ["model base", "instructions", "prompt"], dataFingerprint: "ids:1,2", schemaVersion: 2))
        // Parts never run together.
        #expect(CacheKey(parts: ["ab", "c"]) != CacheKey(parts: ["a", "bc"]))
        // A known digest: the same on every machine and process.
        #expect(CacheKey(parts: []).digest == CacheKey(parts: []).digest)
        #expect(CacheKey(parts: ["x"]).digest == "\(CacheKey(parts: ["x"]).digest)")
    }
}

struct ResponseCacheTests {
    let key = CacheKey(parts: ["coach summary", "sessions 1-7"], dataFingerprint: "sessions:7", tags: ["week-47", "coach"])

    @Test func cacheElseGenerate_generatesOnceThenServesFromMemory() async throws {
        let cache = ResponseCache<String>(), generate = Generator()
        let first = try await cache.value(for: key) { try await generate("summary") }
        let second = try await cache.value(for: key) { try await generate("summary") }
        #expect(first.origin == .generated && second.origin == .memory && second.value == "summary v0")
        #expect(generate.runs == 1)
        let metrics = await cache.metrics
        #expect(metrics.memoryHits == 1 && metrics.misses == 1 && metrics.generations == 1)
    }

    @Test func cacheOnly_missIsAnAnswerNotAnError() async throws {
        let cache = ResponseCache<String>(), generate = Generator()
        let miss = try await cache.value(for: key, policy: .cacheOnly) { try await generate("x") }
        #expect(miss.origin == .none && miss.value == nil && generate.runs == 0)
    }

    @Test func cacheThenGenerate_yieldsCachedThenFresh() async throws {
        let cache = ResponseCache<String>(), generate = Generator()
        _ = try await cache.value(for: key) { try await generate("summary") }
        generate.bump()
        var answers: [CacheAnswer<String>] = []
        for try await answer in cache.responses(for: key, policy: .cacheThenGenerate, generate: { try await generate("summary") }) {
            answers.append(answer)
        }
        #expect(answers.map(\.origin) == [.memory, .generated])
        #expect(answers.map(\.value) == ["summary v0", "summary v1"])
        // Without a cached value there is one answer.
        let other = CacheKey(parts: ["other"])
        var single: [CacheAnswer<String>] = []
        for try await answer in cache.responses(for: other, policy: .cacheThenGenerate, generate: { try await generate("o") }) {
            single.append(answer)
        }
        #expect(single.map(\.origin) == [.generated])
    }

    @Test func refreshFailure_keepsTheCachedValueAndReportsTheError() async throws {
        let cache = ResponseCache<String>(), generate = Generator()
        _ = try await cache.value(for: key) { try await generate("summary") }
        generate.fail(true)
        for policy in [CachePolicy.generateIgnoringCache, .cacheThenGenerate] {
            let answer = try await cache.value(for: key, policy: policy) { try await generate("summary") }
            #expect(answer.value == "summary v0" && answer.refreshError == "model unavailable" && answer.isCached)
        }
        // Still cached, never replaced by nothing.
        let again = try await cache.value(for: key, policy: .cacheOnly) { try await generate("summary") }
        #expect(again.value == "summary v0")
        // With nothing cached, the error is thrown and nothing is stored; a later call retries.
        let fresh = CacheKey(parts: ["fresh"])
        await #expect(throws: Generator.Failure.self) { try await cache.value(for: fresh) { try await generate("f") } }
        generate.fail(false)
        let retried = try await cache.value(for: fresh) { try await generate("f") }
        #expect(retried.origin == .generated)
    }

    @Test func ttlAndStaleThreshold_useTheInjectedClock() async throws {
        let clock = ManualCacheClock()
        let cache = ResponseCache<String>(configuration: .init(timeToLive: 3600, staleAfter: 600), clock: clock)
        let generate = Generator()
        _ = try await cache.value(for: key) { try await generate("summary") }
        clock.advance(by: 599)
        #expect(try await cache.value(for: key) { try await generate("summary") }.isStale == false)
        clock.advance(by: 2)
        generate.bump()
        let stale = try await cache.value(for: key) { try await generate("summary") }
        #expect(stale.isStale && stale.value == "summary v0")   // served at once, refreshed in the background
        await cache.waitForBackgroundRefreshes()
        #expect(try await cache.value(for: key) { try await generate("summary") }.value == "summary v1")
        clock.advance(by: 3601)
        let expired = try await cache.value(for: key, policy: .cacheOnly) { try await generate("summary") }
        #expect(expired.origin == .none)
        let metrics = await cache.metrics
        #expect(metrics.staleServed == 1 && metrics.refreshes == 1)
    }

    /// A clock set back (by hand, or by a time sync stepping it) leaves entries dated after it:
    /// of unknown age, they count as older than every limit, in memory, on disk and in the sweep.
    @Test func ttlStaleAndRetention_countAnEntryDatedAfterTheClockAsTooOld() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ManualCacheClock(), generate = Generator()
        // Stale-while-revalidate: served at once, refreshed; the refreshed entry is fresh.
        let swr = ResponseCache<String>(configuration: .init(staleAfter: 600), clock: clock)
        _ = try await swr.value(for: key) { try await generate("summary") }
        clock.advance(by: -1)
        generate.bump()
        let stale = try await swr.value(for: key) { try await generate("summary") }
        #expect(stale.isStale && stale.value == "summary v0")
        await swr.waitForBackgroundRefreshes()
        let refreshed = try await swr.value(for: key) { try await generate("summary") }
        #expect(!refreshed.isStale && refreshed.value == "summary v1")
        // A time to live: expired from memory, and from the disk after a relaunch.
        let configuration = ResponseCache<String>.Configuration(directory: directory, timeToLive: 3600, retentionDays: 30)
        let cache = ResponseCache<String>(configuration: configuration, clock: clock)
        _ = try await cache.value(for: key) { try await generate("summary") }
        clock.advance(by: -86_400)
        #expect(try await cache.value(for: key, policy: .cacheOnly) { "" }.origin == .none)
        _ = try await cache.value(for: key) { try await generate("summary") }
        clock.advance(by: -1)
        let relaunched = ResponseCache<String>(configuration: configuration, clock: clock)
        #expect(try await relaunched.value(for: key, policy: .cacheOnly) { "" }.origin == .none)
        // The retention sweep removes what is dated after the clock and keeps what is not.
        let other = CacheKey(parts: ["other"])
        _ = try await relaunched.value(for: key) { try await generate("summary") }
        clock.advance(by: -1)
        _ = try await relaunched.value(for: other) { try await generate("other") }
        #expect(await relaunched.sweep() == 1)
        #expect(try await relaunched.value(for: other, policy: .cacheOnly) { "" }.origin == .memory)
        #expect(try await ResponseCache<String>(configuration: configuration, clock: clock)
            .value(for: other, policy: .cacheOnly) { "" }.origin == .disk)
        #expect(try await relaunched.value(for: key, policy: .cacheOnly) { "" }.origin == .none)
    }

    @Test func invalidation_byKeyTagFingerprintAndAll() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = ResponseCache<String>(configuration: .init(directory: directory))
        let generate = Generator()
        let keys = [
            CacheKey(parts: ["a"], dataFingerprint: "d1", tags: ["t1"]),
            CacheKey(parts: ["b"], dataFingerprint: "d2", tags: ["t1", "t2"]),
            CacheKey(parts: ["c"], dataFingerprint: "d2", tags: ["t3"]),
            CacheKey(parts: ["d"], tags: []),
        ]
        func cached() async throws -> [Bool] {
            var out: [Bool] = []
            for k in keys { out.append(try await cache.value(for: k, policy: .cacheOnly) { try await generate("") }.isCached) }
            return out
        }
        for k in keys { _ = try await cache.value(for: k) { try await generate(k.description) } }
        #expect(try await cached() == [true, true, true, true])
        await cache.invalidate(tag: "t2")
        #expect(try await cached() == [true, false, true, true])
        await cache.invalidate(dataFingerprint: "d2")
        #expect(try await cached() == [true, false, false, true])
        await cache.invalidate(key: keys[0])
        #expect(try await cached() == [false, false, false, true])
        await cache.invalidateAll()
        #expect(try await cached() == [false, false, false, false])
        #expect(await cache.metrics.bytesOnDisk == 0)
    }

    @Test func memoryLRU_evictsLeastRecentlyUsedWithinCountAndBytes() async throws {
        let cache = ResponseCache<String>(configuration: .init(memoryEntryLimit: 2))
        let generate = Generator()
        let a = CacheKey(parts: ["a"]), b = CacheKey(parts: ["b"]), c = CacheKey(parts: ["c"])
        _ = try await cache.value(for: a) { try await generate("a") }
        _ = try await cache.value(for: b) { try await generate("b") }
        _ = try await cache.value(for: a) { try await generate("a") }   // a is now the most recent
        _ = try await cache.value(for: c) { try await generate("c") }   // evicts b
        #expect(try await cache.value(for: b, policy: .cacheOnly) { "" }.origin == .none)
        #expect(try await cache.value(for: a, policy: .cacheOnly) { "" }.origin == .memory)
        #expect(await cache.metrics.evictions == 1)
        // Bytes count each entry as its encoded envelope: one of these fits in 1,000, two do not.
        let small = ResponseCache<String>(configuration: .init(memoryByteLimit: 1_000))
        _ = try await small.value(for: a) { String(repeating: "x", count: 400) }
        _ = try await small.value(for: b) { String(repeating: "y", count: 400) }
        #expect(try await small.value(for: a, policy: .cacheOnly) { "" }.origin == .none)
        #expect(try await small.value(for: b, policy: .cacheOnly) { "" }.origin == .memory)
    }

    /// A value JSON cannot hold (here a non-finite number) reaches its caller but is kept in no
    /// tier: what the tiers held stays, and the disk tier stays in use for the values that follow.
    @Test func store_aValueThatDoesNotEncodeIsReturnedButNotCached() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = ResponseCache<[Double]>(configuration: .init(directory: directory))
        let good = CacheKey(parts: ["good"]), bad = CacheKey(parts: ["bad"]), later = CacheKey(parts: ["later"])
        _ = try await cache.value(for: good) { [1, 2] }
        let answer = try await cache.value(for: bad) { [.nan] }
        #expect(answer.origin == .generated && answer.value?.first?.isNaN == true)
        #expect(try await cache.value(for: bad, policy: .cacheOnly) { [] }.origin == .none)
        // A refresh that yields such a value leaves the cached one in place.
        _ = try await cache.value(for: good, policy: .generateIgnoringCache) { [.infinity] }
        #expect(try await cache.value(for: good, policy: .cacheOnly) { [] }.value == [1, 2])
        let metrics = await cache.metrics
        #expect(metrics.unencodableValues == 2 && metrics.lastEncodingError != nil && metrics.lastDiskError == nil)
        #expect(await cache.hasDiskTier)
        // The disk still takes values: another cache over the directory reads the good ones.
        _ = try await cache.value(for: later) { [3] }
        let reopened = ResponseCache<[Double]>(configuration: .init(directory: directory))
        #expect(try await reopened.value(for: good, policy: .cacheOnly) { [] }.value == [1, 2])
        #expect(try await reopened.value(for: later, policy: .cacheOnly) { [] }.origin == .disk)
        #expect(try await reopened.value(for: bad, policy: .cacheOnly) { [] }.origin == .none)
    }

    @Test func singleFlight_thousandRequestsOverTenKeysRunTenGenerations() async throws {
        let cache = ResponseCache<String>(), generate = Generator()
        let keys = (0 ..< 10).map { CacheKey(parts: ["screen \($0)"]) }
        try await withThrowingTaskGroup(of: String?.self) { group in
            for i in 0 ..< 1000 {
                let k = keys[i % 10]
                group.addTask { try await cache.value(for: k) { try await generate(k.description) }.value }
            }
            var answers = 0
            for try await value in group { #expect(value != nil); answers += 1 }
            #expect(answers == 1000)
        }
        #expect(generate.runs == 10)
        await cache.invalidateAll()
        _ = try await cache.value(for: keys[0]) { try await generate("again") }
        #expect(generate.runs == 11)   // one more generation per key per invalidation
    }

    @Test func singleFlight_failureReachesEveryWaiterAndIsNotCached() async throws {
        let cache = ResponseCache<String>(), generate = Generator(), key = self.key
        generate.fail(true)
        let failures = await withTaskGroup(of: Bool.self) { group in
            for _ in 0 ..< 20 {
                group.addTask {
                    do { _ = try await cache.value(for: key) { try await generate("x") }; return false } catch { return true }
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(failures == 20 && generate.runs < 20)
        #expect(try await cache.value(for: key, policy: .cacheOnly) { "" }.origin == .none)
    }

    enum Invalidation: String, CaseIterable, Sendable { case key, tag, fingerprint, all }

    /// The data changes while a generation from the old data is still running: the old result
    /// reaches its caller but is never stored, and a request after the invalidation does not
    /// join the old generation.
    @Test(arguments: Invalidation.allCases)
    func invalidation_duringAGenerationDiscardsItsResult(kind: Invalidation) async throws {
        let cache = ResponseCache<String>()
        let key = CacheKey(parts: ["summary"], dataFingerprint: "rows:1-40", tags: ["inbox"])
        let (started, startedSignal) = AsyncStream<Void>.makeStream()
        let (gate, opener) = AsyncStream<Void>.makeStream()
        let old = Task {
            defer { startedSignal.finish() }   // a generator that never ran must not hang the test
            return try await cache.value(for: key) {
                startedSignal.yield()
                for await _ in gate { break }   // held until the test opens the gate
                return "from old data"
            }.value
        }
        for await _ in started { break }
        switch kind {
        case .key: await cache.invalidate(key: key)
        case .tag: await cache.invalidate(tag: "inbox")
        case .fingerprint: await cache.invalidate(dataFingerprint: "rows:1-40")
        case .all: await cache.invalidateAll()
        }
        // Asked before the old generation ends; joining it would hand back the old result.
        let fresh = Task { try await cache.value(for: key) { "from new data" } }
        opener.yield()
        #expect(try await old.value == "from old data")   // its caller still gets an answer
        let answer = try await fresh.value
        #expect(answer.value == "from new data" && answer.origin == .generated)
        let stored = try await cache.value(for: key, policy: .cacheOnly) { "" }
        #expect(stored.value == "from new data")
        let metrics = await cache.metrics
        #expect(metrics.generations == 2 && metrics.discardedGenerations == 1)
    }

    @Test func invalidation_ofAnotherKeyLeavesARunningGenerationAlone() async throws {
        let cache = ResponseCache<String>()
        let key = CacheKey(parts: ["summary"], tags: ["inbox"]), other = CacheKey(parts: ["other"], tags: ["sent"])
        let (started, startedSignal) = AsyncStream<Void>.makeStream()
        let (gate, opener) = AsyncStream<Void>.makeStream()
        let running = Task {
            defer { startedSignal.finish() }
            return try await cache.value(for: key) {
                startedSignal.yield()
                for await _ in gate { break }
                return "kept"
            }.value
        }
        for await _ in started { break }
        await cache.invalidate(tag: "sent")
        await cache.invalidate(key: other)
        opener.yield()
        #expect(try await running.value == "kept")
        #expect(try await cache.value(for: key, policy: .cacheOnly) { "" }.value == "kept")
        #expect(await cache.metrics.discardedGenerations == 0)
    }
}
