import Foundation
@testable import ResponseCache
import Testing

/// One disk directory shared by caches running at the same time, as an app and its extensions
/// share an app-group container: two caches here stand for two processes (they share nothing in
/// memory, only the directory).
struct SharedDirectoryTests {
    let directory = temporaryDirectory()

    /// An app and its extension share the directory: opening it leaves a temp file a live process
    /// is writing (its id in the name), and each sees the entries the other wrote.
    @Test func open_keepsALiveWritersTempFileAndSeesTheOthersEntries() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let key = CacheKey(parts: ["screen"]), generate = Generator()
        let writing = directory.appendingPathComponent("\(key.digest).tmp-\(getpid())-\(UUID().uuidString)")
        try Data("{\"key\":".utf8).write(to: writing)
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        #expect(FileManager.default.fileExists(atPath: writing.path))
        _ = try await app.value(for: key) { try await generate("screen") }
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.value == "screen v0")
    }

    /// A directory an older version used keeps the marker file its invalidations replaced; opening
    /// it removes that file and nothing else (the entries are served as before).
    @Test func open_removesTheMarkerFileOfVersionsBeforeTheJournal() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = CacheKey(parts: ["screen"]), generate = Generator()
        _ = try await ResponseCache<String>(configuration: .init(directory: directory)).value(for: key) { try await generate("screen") }
        let marker = directory.appendingPathComponent(".invalidated")
        try Data(repeating: 7, count: 16).write(to: marker)
        let before = try Set(FileManager.default.contentsOfDirectory(atPath: directory.path))
        let reopened = ResponseCache<String>(configuration: .init(directory: directory))
        #expect(try Set(FileManager.default.contentsOfDirectory(atPath: directory.path)) == before.subtracting([".invalidated"]))
        #expect(try await reopened.value(for: key, policy: .cacheOnly) { "" }.value == "screen v0")
    }

    /// An invalidation in one cache removes the files, and the other, holding the entry in
    /// memory, stops answering from it: whichever way the entries were invalidated.
    @Test(arguments: ["key", "tag", "data", "all"])
    func invalidate_inOneCacheReachesWhatTheOtherHoldsInMemory(by kind: String) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        let key = CacheKey(parts: ["inventory summary"], dataFingerprint: "rows-41", tags: ["inventory"])
        let other = CacheKey(parts: ["greeting"]), generate = Generator()
        _ = try await app.value(for: key) { try await generate("summary") }
        _ = try await app.value(for: other) { try await generate("greeting") }
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .disk)
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .memory)   // now held in memory
        switch kind {
        case "key": await app.invalidate(key: key)
        case "tag": await app.invalidate(tag: "inventory")
        case "data": await app.invalidate(dataFingerprint: "rows-41")
        default: await app.invalidateAll()
        }
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .none, "invalidated by \(kind)")
        let greeting = try await widget.value(for: other, policy: .cacheOnly) { "" }.origin
        #expect(greeting == (kind == "all" ? .none : .disk))
    }

    /// A value the other cache regenerated (invalidated, then generated again) replaces the one
    /// this cache holds in memory: the file is another one now.
    @Test func value_servesWhatTheOtherRegeneratedNotItsOwnOldCopy() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        let key = CacheKey(parts: ["screen"]), generate = Generator()
        _ = try await app.value(for: key) { try await generate("screen") }
        _ = try await widget.value(for: key, policy: .cacheOnly) { "" }
        await app.invalidate(key: key)
        generate.bump()
        #expect(try await app.value(for: key) { try await generate("screen") }.value == "screen v1")
        let answer = try await widget.value(for: key, policy: .cacheOnly) { "" }
        #expect(answer.value == "screen v1" && answer.origin == .disk)
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .memory)
    }

    /// A file the other cache removed without an invalidation (a retention sweep, an expiry, an
    /// eviction) and then wrote again for the same key may get the old file's inode number back (on
    /// ext4 it can, depending on what the file system did before; eight rounds give it more
    /// chances, and the test below makes the same inode certain): this cache still serves the new
    /// value, not its own copy, and leaves the new file alone, even when both were made at the same
    /// clock time.
    @Test(arguments: ["sweep", "expiry", "eviction"])
    func value_servesWhatTheOtherWroteAgainAfterRemovingTheFile(removedBy way: String) async throws {
        for round in 0 ..< 8 {
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let clock = ManualCacheClock()
            let configuration = ResponseCache<String>.Configuration(directory: directory, timeToLive: way == "expiry" ? 60 : nil,
                                                                    retentionDays: 1, diskByteLimit: way == "eviction" ? 600 : 1 << 20)
            let app = ResponseCache<String>(configuration: configuration, clock: clock)
            let widget = ResponseCache<String>(configuration: configuration, clock: clock)
            let key = CacheKey(parts: ["screen"])
            let file = directory.appendingPathComponent(key.digest + DiskTier<String>.suffix)
            func inode() throws -> UInt64 { try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.systemFileNumber] as? UInt64) }
            _ = try await app.value(for: key) { "screen v0" }
            let first = try inode()
            switch way {
            case "sweep":
                clock.advance(by: 2 * 86_400)
                #expect(await widget.sweep() == 1)
            case "expiry":
                clock.advance(by: 61)
                #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .none)
            default:   // the clock stands still: only the entry's identifier tells the new file apart
                for other in 0 ..< 4 { _ = try await widget.value(for: CacheKey(parts: ["other \(other)"])) { "other screen" } }
            }
            #expect(!FileManager.default.fileExists(atPath: file.path), "removed by \(way)")
            _ = try await widget.value(for: key) { "screen v1" }
            let reused = try inode() == first   // whether this round met a reused inode number
            let answer = try await app.value(for: key, policy: .cacheOnly) { "" }
            #expect(answer.value == "screen v1" && answer.origin == .disk, "round \(round), inode reused: \(reused)")
            #expect(FileManager.default.fileExists(atPath: file.path), "round \(round), inode reused: \(reused)")
        }
    }

    /// The file check itself, with the same inode made certain: another process's entry for the
    /// key written into this cache's file in place (as a new file with a reused inode number looks).
    /// Another creation time, or at the same clock time another identifier, tells it apart, and the
    /// cache answers with it from disk; the same key, identifier and time (a touch) is its own.
    @Test(arguments: ["another time", "another identifier", "a touch"])
    func value_tellsAnEntryWrittenIntoItsFileApart(by change: String) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ManualCacheClock()
        let cache = ResponseCache<String>(configuration: .init(directory: directory), clock: clock)
        let key = CacheKey(parts: ["screen"])
        let file = directory.appendingPathComponent(key.digest + DiskTier<String>.suffix)
        _ = try await cache.value(for: key) { "screen v0" }
        let mine = try JSONDecoder().decode(Envelope<String>.self, from: Data(contentsOf: file))
        var theirs = Envelope(key: key, created: mine.created, value: change == "a touch" ? "screen v0" : "screen v1", id: mine.id)
        if change == "another time" { theirs.created += 1 }
        if change == "another identifier" { theirs.id = UUID() }
        let before = try FileManager.default.attributesOfItem(atPath: file.path)[.systemFileNumber] as? UInt64
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: try theirs.encoded().data)
        try handle.close()
        #expect(try FileManager.default.attributesOfItem(atPath: file.path)[.systemFileNumber] as? UInt64 == before)
        let answer = try await cache.value(for: key, policy: .cacheOnly) { "" }
        #expect(answer.value == theirs.value && answer.origin == (change == "a touch" ? .memory : .disk), "\(change)")
    }

    /// Another cache reading an entry marks its file as used, which changes the file's status:
    /// this cache still answers from memory (the header shows the same entry) and marks nothing.
    @Test func value_fromMemorySurvivesTheOtherCacheReadingTheFile() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        let key = CacheKey(parts: ["screen"]), generate = Generator()
        _ = try await app.value(for: key) { try await generate("screen") }
        for _ in 0 ..< 3 {
            #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin != .none)
            #expect(try await app.value(for: key, policy: .cacheOnly) { "" }.origin == .memory)
        }
        #expect(generate.runs == 1)
    }

    /// Memory follows the journal: an invalidation of something else, in this cache or another,
    /// leaves an entry in memory; a new journal (this one could not see what the old one's last
    /// entries were) sends every entry back to the disk once.
    @Test func value_fromMemorySurvivesUnrelatedInvalidationsNotANewJournal() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        let key = CacheKey(parts: ["screen"], tags: ["home"]), generate = Generator()
        await app.invalidate(tag: "weather")
        _ = try await app.value(for: key) { try await generate("screen") }
        #expect(try await app.value(for: key, policy: .cacheOnly) { "" }.origin == .memory)
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .disk)
        await app.invalidate(tag: "weather")
        await widget.invalidate(key: CacheKey(parts: ["other screen"]))
        #expect(try await app.value(for: key, policy: .cacheOnly) { "" }.origin == .memory)
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .memory)
        for day in 0 ..< InvalidationJournal.capacity { await widget.invalidate(tag: "weather \(day)") }
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .memory)   // its own entries
        #expect(try await app.value(for: key, policy: .cacheOnly) { "" }.origin == .disk)
        #expect(try await app.value(for: key, policy: .cacheOnly) { "" }.origin == .memory)
        #expect(generate.runs == 1)
    }

    /// An entry larger than the disk allows is evicted from it at once; memory still answers for
    /// it (it was never a file another process could invalidate), with no generation again.
    @Test func value_answersFromMemoryForAnEntryTheDiskCouldNotKeep() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = ResponseCache<String>(configuration: .init(directory: directory, diskByteLimit: 64))
        let key = CacheKey(parts: ["long"]), generate = Generator()
        _ = try await cache.value(for: key) { try await generate(String(repeating: "long answer ", count: 20)) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).allSatisfy { $0.hasPrefix(".invalidations") })
        #expect(try await cache.value(for: key) { try await generate("long") }.origin == .memory)
        #expect(generate.runs == 1)
    }

    /// Answers from memory mark the entry's file as used (at most once a minute), so the disk's
    /// least-recently-used eviction, which any process sharing the directory may run, spares it.
    @Test func value_fromMemoryMarksItsFileAsUsed() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ManualCacheClock()
        let cache = ResponseCache<String>(configuration: .init(directory: directory), clock: clock)
        let key = CacheKey(parts: ["screen"]), generate = Generator()
        _ = try await cache.value(for: key) { try await generate("screen") }
        let file = directory.appendingPathComponent(try #require(try FileManager.default.contentsOfDirectory(atPath: directory.path).first { $0.hasSuffix(".entry.json") }))
        func modified() throws -> Date { try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date) }
        let old = Date(timeIntervalSinceNow: -3_600)
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: file.path)
        #expect(try await cache.value(for: key) { "" }.origin == .memory)
        #expect(try modified() < old.addingTimeInterval(1))   // marked when written, under a minute ago
        clock.advance(by: 61)
        #expect(try await cache.value(for: key) { "" }.origin == .memory)
        #expect(try modified() > Date(timeIntervalSinceNow: -60))
    }

    /// Starts a generation for `key` in `cache` that runs until the returned continuation yields,
    /// and waits until it has begun.
    private func holdGeneration(_ cache: ResponseCache<String>, _ key: CacheKey)
        async -> (Task<CacheAnswer<String>, any Error>, AsyncStream<Void>.Continuation) {
        let (release, gate) = AsyncStream<Void>.makeStream()
        let started = await cache.metrics.generations
        let running = Task {
            try await cache.value(for: key, policy: .generateIgnoringCache) { for await _ in release { break }; return "summary" }
        }
        while await cache.metrics.generations == started { await Task.yield() }
        return (running, gate)
    }

    /// A generation running in one cache while either cache invalidates its key, a tag it carries,
    /// its data or everything returns its value to its callers but is not stored: it may have been
    /// made from the data just declared stale. Invalidations of other keys, tags or data, in either
    /// cache, leave it to be stored.
    @Test(arguments: ["key", "tag", "data", "all", "other key", "other tag", "other data"], [true, false])
    func generation_isStoredUnlessAnInvalidationInEitherCacheMatchesIt(_ kind: String, foreign: Bool) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        let key = CacheKey(parts: ["inventory summary"], dataFingerprint: "rows-41", tags: ["inventory", "home"])
        let (running, gate) = await holdGeneration(app, key)
        let invalidating = foreign ? widget : app
        switch kind {
        case "key": await invalidating.invalidate(key: key)
        case "tag": await invalidating.invalidate(tag: "home")
        case "data": await invalidating.invalidate(dataFingerprint: "rows-41")
        case "all": await invalidating.invalidateAll()
        case "other key": await invalidating.invalidate(key: CacheKey(parts: ["inventory summary"], dataFingerprint: "rows-42"))
        case "other tag": await invalidating.invalidate(tag: "weather")
        default: await invalidating.invalidate(dataFingerprint: "rows-42")
        }
        gate.yield()
        #expect(try await running.value.value == "summary")   // the callers get it either way
        let matches = !kind.hasPrefix("other")
        let stored = try await widget.value(for: key, policy: .cacheOnly) { "" }.origin
        #expect(stored == (matches ? .none : .disk), "\(kind), invalidated by the \(foreign ? "other" : "same") cache")
        #expect(await app.metrics.discardedGenerations == (matches ? 1 : 0))
    }

    /// An invalidation that lands as soon as the generation starts (here the generation itself
    /// asks the other cache for it, before reading anything) still counts: the journal is marked
    /// before the generation can begin. 200 rounds: a mark taken after the start lost about a quarter.
    @Test func generation_isNotStoredWhenAnInvalidationLandsAsItStarts() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        for round in 0 ..< 200 {
            let key = CacheKey(parts: ["inventory summary", "\(round)"], tags: ["inventory"])
            let answer = try await app.value(for: key) {
                await widget.invalidate(tag: "inventory")
                return "summary"
            }
            #expect(answer.value == "summary")
            #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .none, "round \(round)")
        }
        #expect(await app.metrics.discardedGenerations == 200)
    }

    /// The journal holds no tag or data fingerprint text (they may name a user or a document),
    /// only their hashes, and stays a valid journal after every invalidation.
    @Test func journal_holdsHashesNotTagsOrFingerprints() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = ResponseCache<String>(configuration: .init(directory: directory))
        await cache.invalidate(tag: "alice@example.com")
        await cache.invalidate(dataFingerprint: "contacts-of-alice")
        await cache.invalidate(key: CacheKey(parts: ["prompt about alice"]))
        let journal = try String(contentsOf: directory.appendingPathComponent(".invalidations"), encoding: .utf8)
        let lines = journal.split(separator: "\n")
        #expect(lines.count == 4 && lines[0].hasPrefix("kvsession-invalidations 1 "))
        #expect(lines.dropFirst().map(\.first) == ["t", "d", "k"])
        #expect(!journal.contains("alice"))
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(Set(names) == [".invalidations", ".invalidations.lock"])
    }

    /// When the journal fills up, the next invalidation starts a new one; a generation that began
    /// in the old one cannot tell what the lost entries were and is not stored, one that begins in
    /// the new one is judged by its entries again.
    @Test func generation_thatSpansANewJournalIsNotStored() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        let key = CacheKey(parts: ["inventory summary"], tags: ["inventory"])
        let (running, gate) = await holdGeneration(app, key)
        for day in 0 ... InvalidationJournal.capacity { await widget.invalidate(tag: "weather \(day)") }
        gate.yield()
        _ = try await running.value
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .none)
        let journal = try Data(contentsOf: directory.appendingPathComponent(".invalidations"))
        #expect(journal.count < 200)   // the new journal: its header and one entry
        let (again, release) = await holdGeneration(app, key)
        await widget.invalidate(tag: "weather")
        release.yield()
        _ = try await again.value
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .disk)
    }

    /// A journal that does not read (torn, garbled, or replaced by something else) while a generation
    /// runs keeps that generation from being stored; the next invalidation replaces it with a valid
    /// journal and later generations are judged by their entries again.
    @Test(arguments: ["torn entry", "garbled header", "not a journal"])
    func generation_isNotStoredWhenTheJournalDoesNotRead(_ damage: String) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        let file = directory.appendingPathComponent(".invalidations")
        let key = CacheKey(parts: ["inventory summary"], tags: ["inventory"])
        let (running, gate) = await holdGeneration(app, key)
        switch damage {
        case "torn entry":
            let handle = try FileHandle(forWritingTo: file)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("t 0123".utf8))
            try handle.close()
        case "garbled header":
            var bytes = try Data(contentsOf: file)
            bytes[3] = UInt8(ascii: "X")
            try bytes.write(to: file)
        default:
            try Data(repeating: 0xFF, count: 300).write(to: file)
        }
        gate.yield()
        _ = try await running.value
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .none, "\(damage)")
        await widget.invalidate(tag: "weather")
        let journal = try String(contentsOf: file, encoding: .utf8)
        #expect(journal.hasPrefix("kvsession-invalidations 1 ") && journal.split(separator: "\n").count == 2)
        let (again, release) = await holdGeneration(app, key)
        await widget.invalidate(tag: "weather")
        release.yield()
        _ = try await again.value
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .disk)
    }

    /// An entry that expired (TTL) and is removed on lookup is not an invalidation: its data did not
    /// change, so a generation another process is running at the time is still stored.
    @Test func expiry_isNotAnInvalidation() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ManualCacheClock()
        let configuration = ResponseCache<String>.Configuration(directory: directory, timeToLive: 60)
        let app = ResponseCache<String>(configuration: configuration, clock: clock)
        let widget = ResponseCache<String>(configuration: configuration, clock: clock)
        let old = CacheKey(parts: ["yesterday"])
        _ = try await widget.value(for: old) { "yesterday" }
        clock.advance(by: 61)
        let key = CacheKey(parts: ["inventory summary"])
        let (running, gate) = await holdGeneration(app, key)
        #expect(try await widget.value(for: old, policy: .cacheOnly) { "" }.origin == .none)   // expired, removed
        gate.yield()
        _ = try await running.value
        #expect(try await widget.value(for: key, policy: .cacheOnly) { "" }.origin == .disk)
    }

    /// The journal's lock file removed while a journal is open (by a person, or a cleanup of the
    /// directory), then created again by another process that takes its lock: the open journal
    /// locks the file now at the path, not the removed one, so its next record waits for the
    /// other's lock and goes on once it is released.
    @Test func journal_locksTheLockFileNowAtItsPathAfterItWasRemoved() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        nonisolated(unsafe) let journal = try InvalidationJournal(directory: directory, marker: ".tmp-test-")
        let lock = directory.appendingPathComponent(".invalidations.lock")
        try FileManager.default.removeItem(at: lock)
        let other = open(lock.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)   // the other process's new lock file
        try #require(other >= 0 && flock(other, LOCK_EX) == 0)
        let recorded = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            journal.record(.tag("weather"))
            recorded.signal()
        }
        #expect(recorded.wait(timeout: .now() + 0.5) == .timedOut, "the record did not wait for the lock on the new file")
        flock(other, LOCK_UN)
        close(other)
        #expect(recorded.wait(timeout: .now() + 30) == .success)
        #expect(journal.mark().map { $0.length } ?? 0 > 0)
        #expect(FileManager.default.fileExists(atPath: lock.path))
    }
}
