import Foundation

/// A cache for whole generations: `Codable` values by ``CacheKey``, in a memory LRU and
/// an optional disk tier, with TTL, stale-while-revalidate, targeted invalidation and
/// single-flight generation.
///
/// Invariants: a failed generation is never stored; a good cached value is never
/// replaced by nothing (a failing refresh keeps it and reports the error beside it);
/// concurrent requests for one key run one generation.
public actor ResponseCache<Value: Codable & Sendable> {
    /// Limits and freshness rules.
    public struct Configuration: Sendable {
        /// Most entries in memory.
        public var memoryEntryLimit = 256
        /// Most bytes in memory, counting each entry as its encoded envelope (value, key and
        /// date as JSON: what the disk tier writes for it).
        public var memoryByteLimit = 8 << 20
        /// The disk tier's own directory (`nil`: memory only). Never point it at user data.
        public var directory: URL?
        /// Most bytes on disk; the least recently used files go first.
        public var diskByteLimit = 64 << 20
        /// Entries older than this are invalid (`nil`: valid while their key matches).
        public var timeToLive: TimeInterval?
        /// Entries older than this are served but refreshed in the background.
        public var staleAfter: TimeInterval?
        /// The retention sweep removes disk entries older than this many days.
        public var retentionDays: Double?

        /// A configuration; every limit has a default.
        public init(directory: URL? = nil, timeToLive: TimeInterval? = nil, staleAfter: TimeInterval? = nil,
                    retentionDays: Double? = nil, memoryEntryLimit: Int = 256, memoryByteLimit: Int = 8 << 20,
                    diskByteLimit: Int = 64 << 20) {
            self.directory = directory
            self.timeToLive = timeToLive
            self.staleAfter = staleAfter
            self.retentionDays = retentionDays
            self.memoryEntryLimit = memoryEntryLimit
            self.memoryByteLimit = memoryByteLimit
            self.diskByteLimit = diskByteLimit
        }
    }

    /// The configuration in use.
    public let configuration: Configuration
    /// Counters (hits, misses, stale answers, refreshes, evictions, bytes on disk).
    public private(set) var metrics = CacheMetrics()
    private let clock: any CacheClock
    private var memory: MemoryTier<Value>
    private var disk: DiskTier<Value>?
    private var inFlight: [String: Flight] = [:]
    private var invalidatedFlights: Set<Int> = []
    /// For each running generation, where the disk directory's invalidation journal stood when it
    /// started: at its end, the entries since then say whether any process sharing the directory
    /// invalidated its key meanwhile (`nil`: the journal could not be read, so it may have).
    private var flightMarks: [Int: InvalidationJournal.Mark?] = [:]
    private var flightCount = 0
    /// How far this cache has followed the directory's invalidation journal (``followJournal()``).
    private var journalSeen: InvalidationJournal.Mark?
    private var backgroundRefreshes: [Task<Void, Never>] = []

    /// A cache; when the disk directory is unusable the cache runs from memory and says so in
    /// ``CacheMetrics/lastDiskError``.
    public init(configuration: Configuration = Configuration(), clock: any CacheClock = SystemCacheClock()) {
        self.configuration = configuration
        self.clock = clock
        memory = MemoryTier(entryLimit: max(1, configuration.memoryEntryLimit), byteLimit: configuration.memoryByteLimit)
        if let directory = configuration.directory {
            do {
                let tier = try DiskTier<Value>(directory: directory, byteLimit: configuration.diskByteLimit)
                disk = tier
                journalSeen = tier.journal.mark()
                metrics.bytesOnDisk = tier.byteCount
            } catch {
                metrics.lastDiskError = "\(error)"
            }
        }
    }

    /// Whether the disk tier is in use.
    public var hasDiskTier: Bool { disk != nil }

    /// Answers for `key` under `policy`: one answer, or for ``CachePolicy/cacheThenGenerate`` with
    /// a cached value, the cached answer then the fresh one (or the cached one again with the
    /// refresh error).
    public nonisolated func responses(for key: CacheKey, policy: CachePolicy,
                                      generate: @escaping @Sendable () async throws -> Value) -> AsyncThrowingStream<CacheAnswer<Value>, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    try await self.answer(key, policy: policy, generate: generate) { continuation.yield($0) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { if case .cancelled = $0 { task.cancel() } }
        }
    }

    /// The final answer for `key` under `policy` (the fresh one under ``CachePolicy/cacheThenGenerate``).
    /// - Throws: the generation's error when there is no cached value to fall back on.
    public func value(for key: CacheKey, policy: CachePolicy = .cacheElseGenerate,
                      generate: @escaping @Sendable () async throws -> Value) async throws -> CacheAnswer<Value> {
        var last: CacheAnswer<Value>?
        try await answer(key, policy: policy, generate: generate) { last = $0 }
        return last!   // answer(...) always yields at least once or throws
    }

    private func answer(_ key: CacheKey, policy: CachePolicy, generate: @escaping @Sendable () async throws -> Value,
                        yield: (CacheAnswer<Value>) -> Void) async throws {
        let cached = policy == .generateIgnoringCache ? peek(key) : lookup(key)
        switch policy {
        case .cacheOnly:
            yield(cached ?? CacheAnswer(value: nil, origin: .none, isStale: false))
        case .cacheElseGenerate:
            if let cached {
                yield(cached)
                if cached.isStale { refreshInBackground(key, generate: generate) }
            } else {
                yield(try await fresh(key, generate: generate, fallback: nil))
            }
        case .cacheThenGenerate:
            if let cached { yield(cached) }
            yield(try await fresh(key, generate: generate, fallback: cached))
        case .generateIgnoringCache:
            yield(try await fresh(key, generate: generate, fallback: cached))
        }
    }

    /// Runs (or joins) the generation for `key`; with a fallback, a failure returns it with the error.
    private func fresh(_ key: CacheKey, generate: @escaping @Sendable () async throws -> Value,
                       fallback: CacheAnswer<Value>?) async throws -> CacheAnswer<Value> {
        do {
            let value = try await generation(key, generate: generate, isRefresh: fallback != nil)
            return CacheAnswer(value: value, origin: .generated, isStale: false, generatedAt: clock.now)
        } catch {
            guard var kept = fallback else { throw error }
            kept.refreshError = "\(error)"
            return kept
        }
    }

    /// A generation under way, and the key it will be stored under.
    private struct Flight {
        let id: Int
        let key: CacheKey
        let task: Task<Value, any Error>
    }

    /// Single flight: concurrent callers for one key share one generation; only success is stored,
    /// and only when no invalidation matching the key landed while it ran (its input may be gone).
    private func generation(_ key: CacheKey, generate: @escaping @Sendable () async throws -> Value,
                            isRefresh: Bool) async throws -> Value {
        if let running = inFlight[key.digest] { return try await running.task.value }
        flightCount += 1
        let id = flightCount
        if let disk { flightMarks[id] = disk.journal.mark() }   // before the generation can start reading its data
        let task = Task { try await generate() }
        inFlight[key.digest] = Flight(id: id, key: key, task: task)
        defer {
            if inFlight[key.digest]?.id == id { inFlight[key.digest] = nil }
            invalidatedFlights.remove(id)
            flightMarks[id] = nil
        }
        metrics.generations += 1
        if isRefresh { metrics.refreshes += 1 }
        let value = try await task.value
        if invalidatedFlights.contains(id) || disk.map({ $0.journal.invalidates(key, since: flightMarks[id] ?? nil) }) == true {
            metrics.discardedGenerations += 1
        } else {
            store(key, value)
        }
        return value
    }

    private func refreshInBackground(_ key: CacheKey, generate: @escaping @Sendable () async throws -> Value) {
        guard inFlight[key.digest] == nil else { return }
        backgroundRefreshes.append(Task { _ = try? await self.generation(key, generate: generate, isRefresh: true) })
    }

    /// Waits for background refreshes started so far (tests and benchmarks).
    public func waitForBackgroundRefreshes() async {
        let tasks = backgroundRefreshes
        backgroundRefreshes = []
        for task in tasks { await task.value }
    }

    // MARK: Tiers

    /// A valid cached answer, counting hits, misses and stale answers.
    private func lookup(_ key: CacheKey) -> CacheAnswer<Value>? {
        guard let answer = peek(key) else {
            metrics.misses += 1
            return nil
        }
        if answer.origin == .memory { metrics.memoryHits += 1 } else { metrics.diskHits += 1 }
        if answer.isStale { metrics.staleServed += 1 }
        return answer
    }

    /// A valid cached answer without counting it (memory first, then disk, promoted on a hit).
    private func peek(_ key: CacheKey) -> CacheAnswer<Value>? {
        followJournal()
        let now = clock.now
        if let entry = memory.get(key.digest), stillOnDisk(entry) {
            if isExpired(entry.created, now) { remove(key); return nil }
            return CacheAnswer(value: entry.value, origin: .memory, isStale: isStale(entry.created, now), generatedAt: entry.created)
        }
        guard let disk else { return nil }
        switch disk.read(key.digest) {
        case .success(nil): return nil
        case let .failure(error):
            metrics.corruptEntries += 1
            metrics.lastDiskError = "\(error)"
            metrics.bytesOnDisk = disk.byteCount
            return nil
        case let .success((envelope, version, bytes)?):
            if isExpired(envelope.created, now) { remove(key); return nil }
            metrics.evictions += memory.put(.init(key: envelope.key, value: envelope.value, created: envelope.created,
                                                  bytes: bytes, id: envelope.id, file: (version, now)))
            return CacheAnswer(value: envelope.value, origin: .disk, isStale: isStale(envelope.created, now),
                               generatedAt: envelope.created)
        }
    }

    /// Keeps a generated value in memory and on disk, each tier counting the bytes of its encoded
    /// envelope. A value JSON cannot hold is not kept anywhere (its caller still gets it): the
    /// tiers are left as they were and ``CacheMetrics/unencodableValues`` counts it.
    private func store(_ key: CacheKey, _ value: Value) {
        let now = clock.now
        let entry: Envelope<Value>.Encoded
        do { entry = try Envelope(key: key, created: now, value: value, id: UUID()).encoded() } catch {
            metrics.unencodableValues += 1
            metrics.lastEncodingError = "\(error)"
            return
        }
        metrics.evictions += memory.put(.init(key: key, value: value, created: now, bytes: entry.data.count, id: entry.id))
        guard let disk else { return }
        do {
            let (evicted, version) = try disk.write(entry)
            metrics.evictions += evicted
            metrics.bytesOnDisk = disk.byteCount
            memory.setFile(key.digest, version.map { ($0, now) })
        } catch {
            // The disk went away: keep serving from memory and say why.
            metrics.lastDiskError = "\(error)"
            self.disk = nil
        }
    }

    /// Drops from memory the entries that invalidations recorded in the directory's journal since
    /// the last look matched, whichever process made them; when the journal cannot say (a new
    /// epoch, a damaged file), every entry that came from or went to the disk. The file check below
    /// cannot do this alone for files written before entries had identifiers: one invalidated and
    /// generated again at the same clock time, in a file that got the old one's inode number back,
    /// would pass it.
    private func followJournal() {
        guard let disk else { return }
        if let seen = journalSeen, let changes = disk.journal.changes(since: seen) {
            memory.removeAll { InvalidationJournal.any(of: changes.entries, matches: $0.key) }
            journalSeen = changes.now
        } else {
            memory.removeAll { $0.file != nil }
            journalSeen = disk.journal.mark()
        }
    }

    /// Whether a memory entry still stands for what the directory holds, which other processes
    /// sharing it (an app and its extensions) may have invalidated, evicted or regenerated: its
    /// file must still be there and hold the same entry (``DiskTier/holds(_:id:created:asOf:)``: the
    /// same version, or the same inode with the same key, identifier and creation time in its
    /// header, which a file that got a removed file's inode number back does not have). If not, the entry leaves
    /// memory and the lookup goes on to the disk. An entry the disk never kept is answered from
    /// memory alone. A file in use is marked as used at most once a minute, so the disk's
    /// least-recently-used eviction spares what memory serves.
    private func stillOnDisk(_ entry: MemoryTier<Value>.Entry) -> Bool {
        guard let disk, let file = entry.file else { return true }
        guard var version = disk.holds(entry.key.digest, id: entry.id, created: entry.created, asOf: file.version) else {
            memory.remove(entry.key.digest)
            return false
        }
        var touched = file.touched
        let now = clock.now
        if now.timeIntervalSince(touched) > 60 || now < touched {
            version = disk.touch(entry.key.digest, expected: version) ?? version   // another file by now: the next look sees it
            touched = now
        }
        if (version, touched) != file { memory.setFile(entry.key.digest, (version, touched)) }
        return true
    }

    private func isExpired(_ created: Date, _ now: Date) -> Bool {
        configuration.timeToLive.map { Self.age(created, now) > $0 } ?? false
    }

    private func isStale(_ created: Date, _ now: Date) -> Bool {
        configuration.staleAfter.map { Self.age(created, now) > $0 } ?? false
    }

    /// Seconds since `created`; infinite for an entry dated after `now`. Such an entry was written
    /// before the clock was set back (by hand, or by a time sync stepping it), so how old it is
    /// cannot be known: it counts as older than any limit, and a time to live is never stretched
    /// by the step.
    private static func age(_ created: Date, _ now: Date) -> TimeInterval {
        created > now ? .infinity : now.timeIntervalSince(created)
    }

    // MARK: Invalidation

    /// Removes the entry for `key` from both tiers.
    ///
    /// Every invalidation also reaches generations still running for matching keys, in this cache
    /// and in any other process sharing its disk directory: their callers get the result, but it
    /// is not stored, and a request arriving after the invalidation starts a generation of its
    /// own instead of joining the old one.
    public func invalidate(key: CacheKey) { invalidate(.key(digest: key.digest)) }

    /// Removes every entry carrying `tag`.
    public func invalidate(tag: String) { invalidate(.tag(tag)) }

    /// Removes every entry made from data with this fingerprint.
    public func invalidate(dataFingerprint: String) { invalidate(.dataFingerprint(dataFingerprint)) }

    /// Removes everything.
    public func invalidateAll() { invalidate(.all) }

    /// Records the invalidation in the directory's journal first (so a generation of another process
    /// that ends after the files are gone finds it there), then removes what matches from both
    /// tiers and abandons matching generations of this cache.
    private func invalidate(_ scope: InvalidationScope) {
        if let recorded = disk?.journal.record(scope), let before = recorded.before, before == journalSeen {
            journalSeen = recorded.after   // nothing new but this cache's own entry
        }
        if case let .key(digest) = scope {
            memory.remove(digest)
            disk?.remove(digest)
        } else {
            memory.removeAll { scope.matches($0.key) }
            _ = disk?.removeAll(where: scope == .all ? nil : { key, _ in scope.matches(key) })
        }
        metrics.bytesOnDisk = disk?.byteCount ?? 0
        abandonFlights(where: scope.matches)
    }

    /// Removes an expired entry from both tiers: not an invalidation (its data did not change),
    /// so running generations are left alone.
    private func remove(_ key: CacheKey) {
        memory.remove(key.digest)
        disk?.remove(key.digest)
        metrics.bytesOnDisk = disk?.byteCount ?? 0
    }

    /// Marks running generations for matching keys so their results are not stored, and
    /// detaches them so later requests do not join them.
    private func abandonFlights(where matches: (CacheKey) -> Bool) {
        for (digest, flight) in inFlight where matches(flight.key) {
            invalidatedFlights.insert(flight.id)
            inFlight[digest] = nil
        }
    }

    /// The retention sweep: removes disk (and memory) entries older than ``Configuration/retentionDays``,
    /// and those dated after the clock's time (written before the clock was set back: of unknown age).
    /// - Returns: how many disk entries were removed.
    @discardableResult
    public func sweep() -> Int {
        guard let days = configuration.retentionDays else { return 0 }
        let now = clock.now, limit = days * 86_400
        memory.removeAll { Self.age($0.created, now) > limit }
        guard let disk else { return 0 }
        let removed = disk.removeAll { _, created in Self.age(created, now) > limit }
        metrics.evictions += removed
        metrics.bytesOnDisk = disk.byteCount
        return removed
    }
}
