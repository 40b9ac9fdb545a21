import Foundation
import ResponseCache
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

    /// An entry larger than the disk allows is evicted from it at once; memory still answers for
    /// it (it was never a file another process could invalidate), with no generation again.
    @Test func value_answersFromMemoryForAnEntryTheDiskCouldNotKeep() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = ResponseCache<String>(configuration: .init(directory: directory, diskByteLimit: 64))
        let key = CacheKey(parts: ["long"]), generate = Generator()
        _ = try await cache.value(for: key) { try await generate(String(repeating: "long answer ", count: 20)) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
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
        let file = directory.appendingPathComponent(try #require(try FileManager.default.contentsOfDirectory(atPath: directory.path).first))
        func modified() throws -> Date { try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date) }
        let old = Date(timeIntervalSinceNow: -3_600)
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: file.path)
        #expect(try await cache.value(for: key) { "" }.origin == .memory)
        #expect(try modified() < old.addingTimeInterval(1))   // marked when written, under a minute ago
        clock.advance(by: 61)
        #expect(try await cache.value(for: key) { "" }.origin == .memory)
        #expect(try modified() > Date(timeIntervalSinceNow: -60))
    }

    /// A generation running in one cache while the other invalidates (anything) returns its value
    /// to its callers but does not store it: it may have been made from the data just declared
    /// stale. This cache's own unrelated invalidations do not count against it.
    @Test func generation_isNotStoredWhenAnotherCacheInvalidatesWhileItRuns() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = ResponseCache<String>(configuration: .init(directory: directory))
        let widget = ResponseCache<String>(configuration: .init(directory: directory))
        for foreign in [true, false] {
            let key = CacheKey(parts: ["inventory summary", "\(foreign)"], tags: ["inventory"])
            let (release, gate) = AsyncStream<Void>.makeStream()
            let started = await app.metrics.generations
            let running = Task { try await app.value(for: key) { for await _ in release { break }; return "summary" } }
            while await app.metrics.generations == started { await Task.yield() }
            if foreign { await widget.invalidate(tag: "inventory") } else { await app.invalidate(tag: "weather") }
            gate.yield()
            #expect(try await running.value.value == "summary")   // the callers get it either way
            let stored = try await widget.value(for: key, policy: .cacheOnly) { "" }.origin
            #expect(stored == (foreign ? .none : .disk), "invalidated by the \(foreign ? "other cache" : "same cache, another tag")")
            #expect(await app.metrics.discardedGenerations == 1)
        }
    }
}
