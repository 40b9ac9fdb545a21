import Foundation
import ResponseCache
import Testing

/// Faults the disk tier must survive with nothing lost.
struct DiskTierTests {
    let directory = temporaryDirectory()

    func entryFiles() -> [URL] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".entry.json") }.map { directory.appendingPathComponent($0) }
    }

    @Test func newProcess_overTheSameDirectoryServesFromDiskAndPromotes() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = CacheKey(parts: ["screen"]), generate = Generator()
        let first = ResponseCache<String>(configuration: .init(directory: directory))
        _ = try await first.value(for: key) { try await generate("screen") }
        let second = ResponseCache<String>(configuration: .init(directory: directory))   // memory tier gone
        let fromDisk = try await second.value(for: key) { try await generate("screen") }
        #expect(fromDisk.origin == .disk && fromDisk.value == "screen v0" && generate.runs == 1)
        #expect(try await second.value(for: key) { try await generate("screen") }.origin == .memory)
        let metrics = await second.metrics
        #expect(metrics.diskHits == 1 && metrics.memoryHits == 1 && metrics.bytesOnDisk > 0)
    }

    @Test func files_arePrivateAndNamedWithoutPromptText() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let secret = "my diagnosis is private"
        let cache = ResponseCache<String>(configuration: .init(directory: directory))
        _ = try await cache.value(for: CacheKey(parts: [secret])) { "answer" }
        let fm = FileManager.default
        #expect((try fm.attributesOfItem(atPath: directory.path)[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        let files = entryFiles()
        #expect(files.count == 1)
        for file in files {
            #expect((try fm.attributesOfItem(atPath: file.path)[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            #expect(!file.lastPathComponent.contains("diagnosis") && !file.lastPathComponent.contains("private"))
        }
    }

    @Test(arguments: ["truncated", "garbled", "empty"])
    func corruptEntry_isAMissRemovedAndReportedOthersUnaffected(kind: String) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = CacheKey(parts: ["good"]), bad = CacheKey(parts: ["bad"]), generate = Generator()
        let writer = ResponseCache<String>(configuration: .init(directory: directory))
        _ = try await writer.value(for: good) { try await generate("good") }
        _ = try await writer.value(for: bad) { try await generate("bad") }
        let file = try #require(entryFiles().first { $0.lastPathComponent.hasPrefix(bad.digest) })
        let data = try Data(contentsOf: file)
        try ["truncated": data.prefix(data.count / 2), "garbled": Data("{not json at all".utf8), "empty": Data()][kind]!.write(to: file)
        let reader = ResponseCache<String>(configuration: .init(directory: directory))
        let answer = try await reader.value(for: bad, policy: .cacheOnly) { "" }
        #expect(answer.origin == .none)
        #expect(!FileManager.default.fileExists(atPath: file.path))
        let metrics = await reader.metrics
        #expect(metrics.corruptEntries == 1 && metrics.lastDiskError?.contains("corrupt") == true)
        #expect(try await reader.value(for: good, policy: .cacheOnly) { "" }.value == "good v0")
    }

    @Test func crashBetweenWriteAndRename_keepsTheOldEntryAndCleansTheTempFile() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = CacheKey(parts: ["screen"]), generate = Generator()
        let cache = ResponseCache<String>(configuration: .init(directory: directory))
        _ = try await cache.value(for: key) { try await generate("screen") }
        // A crash mid-write leaves a half-written temp file beside the old entry.
        let temp = directory.appendingPathComponent("\(key.digest).tmp-crashed")
        try Data("{\"key\":".utf8).write(to: temp)
        let reopened = ResponseCache<String>(configuration: .init(directory: directory))
        #expect(!FileManager.default.fileExists(atPath: temp.path))
        #expect(try await reopened.value(for: key, policy: .cacheOnly) { "" }.value == "screen v0")
    }

    @Test func unwritableDirectory_degradesToMemoryOnlyAndStillGenerates() async throws {
        // A regular file where the directory should be: the tier cannot be created.
        let blocker = temporaryDirectory()
        try Data("not a directory".utf8).write(to: blocker)
        defer { try? FileManager.default.removeItem(at: blocker) }
        let cache = ResponseCache<String>(configuration: .init(directory: blocker.appendingPathComponent("cache")))
        #expect(await cache.hasDiskTier == false)
        #expect(await cache.metrics.lastDiskError?.contains("unusable") == true)
        let generate = Generator(), key = CacheKey(parts: ["k"])
        #expect(try await cache.value(for: key) { try await generate("k") }.origin == .generated)
        #expect(try await cache.value(for: key) { try await generate("k") }.origin == .memory)
    }

    @Test func diskByteLimit_evictsOldestFirst() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ManualCacheClock()
        let cache = ResponseCache<String>(configuration: .init(directory: directory, memoryEntryLimit: 1, diskByteLimit: 700),
                                          clock: clock)
        let keys = (0 ..< 6).map { CacheKey(parts: ["k\($0)"]) }
        for k in keys {
            _ = try await cache.value(for: k) { String(repeating: "v", count: 100) }
            try await Task.sleep(for: .milliseconds(15))   // distinct file modification times
        }
        let metrics = await cache.metrics
        #expect(metrics.bytesOnDisk <= 700 && metrics.evictions > 0)
        #expect(try await cache.value(for: keys[5], policy: .cacheOnly) { "" }.isCached)
        #expect(try await cache.value(for: keys[0], policy: .cacheOnly) { "" }.origin == .none)
    }

    @Test func retentionSweep_removesEntriesOlderThanNDays() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ManualCacheClock()
        let cache = ResponseCache<String>(configuration: .init(directory: directory, retentionDays: 7), clock: clock)
        let old = CacheKey(parts: ["old"]), recent = CacheKey(parts: ["recent"])
        _ = try await cache.value(for: old) { "old" }
        clock.advance(by: 5 * 86_400)
        _ = try await cache.value(for: recent) { "recent" }
        clock.advance(by: 3 * 86_400)   // old is 8 days old, recent 3
        #expect(await cache.sweep() == 1)
        #expect(try await cache.value(for: old, policy: .cacheOnly) { "" }.origin == .none)
        #expect(try await cache.value(for: recent, policy: .cacheOnly) { "" }.isCached)
    }
}
