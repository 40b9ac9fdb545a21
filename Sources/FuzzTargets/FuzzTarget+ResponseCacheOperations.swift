import Foundation
import LMRuntime
import ResponseCache

extension FuzzTarget {
    /// Runs `data` as a program of response-cache operations against a model of what the cache
    /// promises, trapping on any answer, generation or file the model does not allow. The first
    /// byte sets the cache up (``ResponseCacheProgram/Setup``); then each operation is a byte and
    /// its operands:
    ///
    /// - request: which cache, which of four keys, the policy, and whether the generation fails;
    ///   every answer is checked (origin, value, staleness, time, refresh error), and so is the
    ///   number of generations, background refreshes included.
    /// - invalidate: which cache, and a key, a tag, a data fingerprint or everything.
    /// - advance: the clock, by a second, 29 or 31 seconds (around staleness), 61 (past the
    ///   time to live) or a day and a second (past retention).
    /// - relaunch: one cache starts again on the same directory, its memory empty.
    /// - sweep: one cache's retention sweep, whose count is checked; or, with bit 6 of its operand,
    ///   damage: a key's file cut in half in place, which the next lookup must find corrupt.
    ///
    /// With a disk tier two caches share one directory, as an app and its extension do; after
    /// every operation the directory must hold a file for exactly the entries the model holds.
    static func responseCacheOperations(_ data: Data) {
        guard let setup = data.first else { return }
        let directory = scratch.appendingPathComponent("response-cache-operations")
        try? FileManager.default.removeItem(at: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let done = DispatchSemaphore(value: 0)
        Task {
            var program = ResponseCacheProgram(setup: .init(setup), directory: directory)
            await program.run(data.dropFirst())
            done.signal()
        }
        done.wait()
    }
}

/// One fuzz input's caches, clock and model.
struct ResponseCacheProgram {
    /// The first byte: bit 0 a disk tier (two caches on it) or memory only (one cache), bit 1 a
    /// time to live of 60 s, bit 2 answers stale after 30 s, bit 3 retention of one day, bit 4
    /// limits so small that entries are evicted (memory holds two, the disk two or three). Every
    /// entry fits on the disk: one that did not would live on in its cache's memory alone, which
    /// the model (one value a key, the directory's) does not follow.
    struct Setup {
        let onDisk, expires, goesStale, retains, evicts: Bool
        init(_ byte: UInt8) {
            (onDisk, expires, goesStale, retains, evicts) = (byte & 1 != 0, byte & 2 != 0, byte & 4 != 0, byte & 8 != 0, byte & 16 != 0)
        }
    }

    /// The keys: two data fingerprints and two tags, each on two keys, and one tag on all.
    static let keys = (0 ..< 4).map {
        CacheKey(parts: ["screen \($0)"], dataFingerprint: "rows \($0 % 2)", tags: ["tab \($0 / 2)", "every screen"])
    }

    /// A cached entry as the model holds it.
    struct Held: Equatable {
        var value: String
        var created: Date
    }

    let setup: Setup
    let directory: URL
    let clock = ManualCacheClock()
    let configuration: ResponseCache<String>.Configuration
    var caches: [ResponseCache<String>]
    /// What the directory holds (with a disk tier) or the one cache holds (memory only), by key
    /// index. An expired entry stays until a lookup or a sweep removes it, as the cache does.
    var model: [Int: Held] = [:]
    /// Keys whose file was damaged (cut in half in place, as a torn write leaves it) and is still
    /// there: the next lookup of the key, in either cache, finds it corrupt and removes it; an
    /// invalidation by key or of everything removes it too, one by tag, data fingerprint or age
    /// cannot read it and leaves it.
    var damaged: Set<Int> = []
    /// Generations so far, and whether the next one fails.
    let runs = Locked(0), failing = Locked(false)

    init(setup: Setup, directory: URL) {
        self.setup = setup
        self.directory = directory
        configuration = .init(directory: setup.onDisk ? directory : nil, timeToLive: setup.expires ? 60 : nil,
                              staleAfter: setup.goesStale ? 30 : nil, retentionDays: setup.retains ? 1 : nil,
                              memoryEntryLimit: setup.evicts ? 2 : 256, diskByteLimit: setup.evicts ? 700 : 1 << 20)   // entries of about 230 bytes
        caches = []
        caches = (0 ..< (setup.onDisk ? 2 : 1)).map { _ in makeCache() }
    }

    func makeCache() -> ResponseCache<String> { ResponseCache(configuration: configuration, clock: clock) }

    mutating func run(_ program: Data) async {
        var input = program.makeIterator()
        while let operation = input.next() {
            guard let operand = input.next() else { return }
            let cache = Int(operand >> 7) % caches.count
            switch operation % 5 {
            case 0:
                await request(cache, key: Int(operand) % 4, policy: CachePolicy.allCases[Int(operand >> 2) % 4],
                              fails: operand & 0x40 != 0)
            case 1:
                await invalidate(cache, Int(operand) % 4, Int(operand >> 2) % 4)
            case 2:
                clock.advance(by: [1, 29, 31, 61, 86_401][Int(operand) % 5])
            case 3:
                caches[cache] = makeCache()
                if !setup.onDisk { model = [:] }
            case _ where operand & 0x40 != 0:
                damage(Int(operand) % 4)
            default:
                let removed = await caches[cache].sweep()
                let cutoff = clock.now.addingTimeInterval(-86_400)
                let swept = setup.retains ? model.filter { $0.value.created < cutoff } : [:]
                // Memory only, the sweep counts no files; with eviction, some of the model's entries may be gone already.
                let counted = setup.onDisk ? swept.count : 0
                precondition(setup.evicts ? removed <= counted : removed == counted, "the sweep removed \(removed) entries, not \(counted)")
                for key in swept.keys { model[key] = nil }
            }
            checkDirectory()
        }
    }

    /// One request and its answers against the model.
    mutating func request(_ index: Int, key: Int, policy: CachePolicy, fails: Bool) async {
        let cache = caches[index], cacheKey = Self.keys[key], before = runs.withLock { $0 }, counted = await cache.metrics
        failing.withLock { $0 = fails }
        let (runs, failing) = (runs, failing)
        var answers: [CacheAnswer<String>] = [], thrown = false
        do {
            for try await answer in cache.responses(for: cacheKey, policy: policy, generate: {
                let run = runs.withLock { $0 += 1; return $0 }
                if failing.withLock({ $0 }) { throw CancellationError() }
                return "screen \(key) #\(run)"
            }) { answers.append(answer) }
        } catch { thrown = true }
        await cache.waitForBackgroundRefreshes()
        let generations = runs.withLock { $0 } - before

        // What a lookup finds: nothing expired (the lookup removes it), and with small limits
        // perhaps nothing at all (evicted), which only the answers can tell.
        let now = clock.now
        if let held = model[key], setup.expires, now.timeIntervalSince(held.created) > 60 { model[key] = nil }
        let corrupt = damaged.remove(key) != nil ? 1 : 0   // unless evicted meanwhile
        let looked: Bool? = switch policy {
        case .cacheOnly: answers.first?.isCached
        case .cacheElseGenerate, .cacheThenGenerate: answers.first?.isCached ?? false
        case .generateIgnoringCache: fails ? answers.first?.isCached ?? false : nil
        }
        if setup.evicts, looked == false { model[key] = nil }
        let found = model[key]
        if let looked { precondition(looked == (found != nil), "\(policy) answered \(looked ? "from the cache" : "without it") against the model") }

        func cached(refreshError: Bool = false) -> Expected {
            .init(value: found!.value, cached: true, stale: setup.goesStale && now.timeIntervalSince(found!.created) > 30,
                  at: found!.created, refreshError: refreshError)
        }
        let fresh = Expected(value: "screen \(key) #\(before + 1)", cached: false, stale: false, at: now, refreshError: false)
        var expected: [Expected] = [], expectedRuns = 1
        switch (policy, found) {
        case (.cacheOnly, nil):
            expected = [.init(value: nil, cached: false, stale: false, at: nil, refreshError: false)]
            expectedRuns = 0
        case (.cacheOnly, _?):
            expected = [cached()]
            expectedRuns = 0
        case (.cacheElseGenerate, _?):
            expected = [cached()]
            expectedRuns = expected[0].stale ? 1 : 0   // a stale answer starts a refresh
        case (.cacheElseGenerate, nil), (.generateIgnoringCache, nil), (.cacheThenGenerate, nil):
            expected = fails ? [] : [fresh]
        case (.cacheThenGenerate, _?):
            expected = [cached(), fails ? cached(refreshError: true) : fresh]
        case (.generateIgnoringCache, _?):
            expected = [fails ? cached(refreshError: true) : fresh]
        }
        precondition(generations == expectedRuns, "\(policy) ran \(generations) generations, not \(expectedRuns)")
        precondition(thrown == (fails && expected.isEmpty), "\(policy) \(thrown ? "threw" : "did not throw") against the model")
        let got = answers.map(Expected.init)
        precondition(got == expected, "\(policy) answered \(got) against \(expected)")
        if expectedRuns == 1, !fails { model[key] = Held(value: "screen \(key) #\(before + 1)", created: now) }

        // The counters say the same: a lookup (every policy but a forced generation) is a hit
        // from memory or disk or a miss, a generation with a cached value to fall back on is a refresh.
        let metrics = await cache.metrics, lookup = policy != .generateIgnoringCache
        let counts = [metrics.memoryHits - counted.memoryHits, metrics.diskHits - counted.diskHits, metrics.misses - counted.misses,
                      metrics.staleServed - counted.staleServed, metrics.generations - counted.generations]
        let origin = found == nil ? nil : answers.first?.origin
        let expectedCounts = [lookup && origin == .memory, lookup && origin == .disk, lookup && found == nil,
                              lookup && expected.first?.stale == true].map { $0 ? 1 : 0 } + [generations]
        precondition(counts == expectedCounts, "\(policy): hits, misses, stale answers and generations counted \(counts), not \(expectedCounts)")
        if !setup.evicts || looked != nil {   // with eviction, a forced generation's lookup is unseen
            let refreshes = found != nil && expectedRuns == 1 ? 1 : 0
            precondition(metrics.refreshes - counted.refreshes == refreshes, "\(policy): refreshes miscounted")
        }
        let corrupted = metrics.corruptEntries - counted.corruptEntries
        precondition(setup.evicts ? corrupted <= corrupt : corrupted == corrupt, "\(policy): \(corrupted) corrupt entries, not \(corrupt)")
        precondition(metrics.discardedGenerations == 0 && (metrics.lastDiskError == nil || metrics.corruptEntries > 0),
                     "a generation was discarded, or the disk reported an error, with no cause")
    }

    /// One invalidation: a key, a tag (one matching no key too), a data fingerprint, or all.
    mutating func invalidate(_ index: Int, _ scope: Int, _ operand: Int) async {
        let cache = caches[index]
        switch scope {
        case 0:
            await cache.invalidate(key: Self.keys[operand])
            model[operand] = nil
            damaged.remove(operand)
        case 1:
            let tag = ["tab 0", "tab 1", "every screen", "no screen"][operand]
            await cache.invalidate(tag: tag)
            model = model.filter { !Self.keys[$0.key].tags.contains(tag) }
        case 2:
            await cache.invalidate(dataFingerprint: "rows \(operand % 3)")
            model = model.filter { Self.keys[$0.key].dataFingerprint != "rows \(operand % 3)" }
        default:
            await cache.invalidateAll()
            model = [:]
            damaged = []
        }
    }

    /// Cuts `key`'s file to half its length in place (the same inode), if there is one.
    mutating func damage(_ key: Int) {
        guard setup.onDisk, let handle = FileHandle(forUpdatingAtPath: directory.appendingPathComponent(Self.keys[key].digest + ".entry.json").path),
              let length = try? handle.seekToEnd() else { return }
        try? handle.truncate(atOffset: length / 2)
        try? handle.close()
        model[key] = nil
        damaged.insert(key)
    }

    /// With a disk tier: a file for each entry the model holds or damaged and, unless entries are
    /// evicted, for no other; never a temporary file left behind.
    func checkDirectory() {
        guard setup.onDisk else { return }
        let names = Set((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
        let entries = names.filter { $0.hasSuffix(".entry.json") }
        let held = Set(damaged.union(model.keys).map { Self.keys[$0].digest + ".entry.json" })
        precondition(!names.contains { $0.contains(".tmp-") }, "a temporary file was left in the cache's directory")
        precondition(entries.isSubset(of: held), "the directory holds an entry the model does not")
        precondition(setup.evicts || entries == held, "the directory lost an entry the model holds")
    }

    /// What an answer must be, compared field by field.
    struct Expected: Equatable, CustomStringConvertible {
        var value: String?
        var cached: Bool
        var stale: Bool
        var at: Date?
        var refreshError: Bool

        init(value: String?, cached: Bool, stale: Bool, at: Date?, refreshError: Bool) {
            (self.value, self.cached, self.stale, self.at, self.refreshError) = (value, cached, stale, at, refreshError)
        }

        init(_ answer: CacheAnswer<String>) {
            self.init(value: answer.value, cached: answer.isCached, stale: answer.isStale, at: answer.generatedAt,
                      refreshError: answer.refreshError != nil)
        }

        var description: String { "\(value ?? "nothing")\(cached ? " cached" : "")\(stale ? " stale" : "")\(refreshError ? " with an error" : "")" }
    }
}
