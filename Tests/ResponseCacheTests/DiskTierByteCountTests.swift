import Foundation
@testable import ResponseCache
import Testing

/// The disk tier's byte count and eviction: listed from the directory only when it may be wrong,
/// and always what the directory holds, whichever tier (process) changed it.
struct DiskTierByteCountTests {
    let directory = temporaryDirectory()

    /// What the directory's entry files add up to, listed independently of the tier.
    func bytesInDirectory() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(DiskTier<String>.suffix) }
            .map { (try? FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent($0).path)[.size] as? Int) ?? 0 }
            .reduce(0, +)
    }

    func encoded(_ name: String, _ value: String = String(repeating: "v", count: 200)) throws -> Envelope<String>.Encoded {
        try Envelope(key: CacheKey(parts: [name]), created: Date(timeIntervalSince1970: 1_800_000_000), value: value).encoded()
    }

    /// Another tier's change has to move the directory's modification time past what this one
    /// recorded; on a file system with coarse time stamps, one tick is a few milliseconds.
    func nextTick() async throws { try await Task.sleep(for: .milliseconds(20)) }

    @Test func write_underTheLimitListsTheDirectoryOnlyOnce() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let tier = try DiskTier<String>(directory: directory, byteLimit: 1 << 20)
        for i in 0 ..< 200 {
            _ = try tier.write(try encoded("entry \(i)"))
            #expect(tier.byteCount == bytesInDirectory())
        }
        _ = try tier.write(try encoded("entry 7", "replaced by a shorter value"))   // a file replaced counts once
        #expect(tier.byteCount == bytesInDirectory())
        tier.remove(CacheKey(parts: ["entry 8"]).digest)
        #expect(tier.byteCount == bytesInDirectory())
        #expect(tier.listings == 1)
    }

    /// The entry just written is never what its own write evicts, even when every other file
    /// looks used later (time stamps of a coarse clock tie; here they are set ahead).
    @Test func write_neverEvictsTheEntryItWrites() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let perFile = try encoded("entry 1").data.count
        let tier = try DiskTier<String>(directory: directory, byteLimit: 3 * perFile)
        func file(_ i: Int) -> String { directory.appendingPathComponent(CacheKey(parts: ["entry \(i)"]).digest + DiskTier<String>.suffix).path }
        for i in 0 ..< 3 {
            _ = try tier.write(try encoded("entry \(i)"))
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 3_600)], ofItemAtPath: file(i))
        }
        let written = try tier.write(try encoded("entry 3"))
        #expect(written.evicted == 2 && written.version != nil && FileManager.default.fileExists(atPath: file(3)))
        #expect(tier.byteCount == bytesInDirectory() && bytesInDirectory() <= tier.lowWater)
        // An entry larger than the low-water mark stays alone.
        let large = try encoded("entry 4", String(repeating: "v", count: 2 * perFile + perFile / 2))
        #expect(large.data.count > tier.lowWater && large.data.count <= tier.byteLimit)
        #expect(try tier.write(large).evicted == 2 && FileManager.default.fileExists(atPath: file(4)))
        #expect(tier.byteCount == bytesInDirectory() && bytesInDirectory() == large.data.count)
    }

    @Test func write_overTheLimitEvictsTheLeastRecentlyUsedDownToTheLowWaterMark() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let perFile = try encoded("entry 100").data.count   // the longest name written here
        let tier = try DiskTier<String>(directory: directory, byteLimit: 160 * perFile)
        var evicted = 0
        for i in 0 ..< 400 {
            let written = try tier.write(try encoded("entry \(i)"))
            evicted += written.evicted
            let held = bytesInDirectory()
            #expect(tier.byteCount == held)
            #expect(held <= tier.byteLimit, "after entry \(i)")
            if written.evicted > 0 { #expect(held <= tier.lowWater, "after entry \(i)") }
            #expect(written.version != nil && FileManager.default.fileExists(atPath: directory.appendingPathComponent(
                CacheKey(parts: ["entry \(i)"]).digest + DiskTier<String>.suffix).path))   // the newest stays
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(DiskTier<String>.suffix) }
        #expect(files.count + evicted == 400)
        // A listing once the limit is passed, then one per sixteenth of the limit written (ten
        // files), not one a write: 240 writes past the first 160.
        #expect(tier.listings <= 2 + 240 / 9, "\(tier.listings) listings")
    }

    @Test func write_ofAnEntryLargerThanTheLimitKeepsTheOthers() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let tier = try DiskTier<String>(directory: directory, byteLimit: 4_000)
        for i in 0 ..< 5 { _ = try tier.write(try encoded("entry \(i)")) }
        let before = bytesInDirectory()
        let older = directory.appendingPathComponent(CacheKey(parts: ["entry 2"]).digest + DiskTier<String>.suffix)
        let olderBytes = try #require(try FileManager.default.attributesOfItem(atPath: older.path)[.size] as? Int)
        #expect(try tier.write(try encoded("entry 2", String(repeating: "long ", count: 1_000))) == (1, nil))
        // The key's older file is gone (it no longer stands for the value), the others stay.
        #expect(bytesInDirectory() == before - olderBytes)
        #expect(tier.byteCount == bytesInDirectory())
        #expect((try tier.read(CacheKey(parts: ["entry 2"]).digest).get()) == nil)
        #expect((try tier.read(CacheKey(parts: ["entry 3"]).digest).get())?.envelope.value.count == 200)
    }

    @Test func removeAll_takesWhatMatchesByKeyAndCreationAndKeepsTheCount() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let tier = try DiskTier<String>(directory: directory, byteLimit: 1 << 20)
        let start = Date()
        for i in 0 ..< 12 {
            _ = try tier.write(Envelope(key: CacheKey(parts: ["entry \(i)"], tags: i % 3 == 0 ? ["third"] : []),
                                        created: start.addingTimeInterval(Double(i)), value: "value \(i)").encoded())
        }
        #expect(tier.removeAll { key, _ in key.tags.contains("third") } == 4)
        #expect(tier.byteCount == bytesInDirectory())
        #expect(tier.removeAll { _, created in created < start.addingTimeInterval(6) } == 4)   // 1, 2, 4, 5
        #expect(tier.byteCount == bytesInDirectory())
        #expect((try tier.read(CacheKey(parts: ["entry 7"]).digest).get())?.envelope.value == "value 7")
        #expect(tier.removeAll(where: nil) == 4)
        #expect(tier.byteCount == 0 && bytesInDirectory() == 0)
    }

    /// Two tiers on one directory stand for two processes: each one's count follows what the
    /// other wrote and removed.
    @Test func byteCount_followsWhatAnotherTierWroteAndRemoved() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = try DiskTier<String>(directory: directory, byteLimit: 1 << 20)
        let widget = try DiskTier<String>(directory: directory, byteLimit: 1 << 20)
        for i in 0 ..< 3 { _ = try app.write(try encoded("app \(i)")) }
        #expect(app.byteCount == bytesInDirectory())
        try await nextTick()
        for i in 0 ..< 2 { _ = try widget.write(try encoded("widget \(i)", "short")) }
        #expect(app.byteCount == bytesInDirectory() && widget.byteCount == bytesInDirectory())
        try await nextTick()
        widget.remove(CacheKey(parts: ["app 1"]).digest)
        #expect(app.byteCount == bytesInDirectory() && widget.byteCount == bytesInDirectory())
        try await nextTick()
        _ = try app.write(try encoded("app 3"))
        #expect(app.byteCount == bytesInDirectory() && widget.byteCount == bytesInDirectory())
    }

    /// Two tiers writing in turns hold one limit for the directory.
    @Test func write_twoTiersWritingInTurnsHoldTheLimitTogether() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let perFile = try encoded("app 10").data.count
        let limit = 12 * perFile
        let tiers = [try DiskTier<String>(directory: directory, byteLimit: limit), try DiskTier<String>(directory: directory, byteLimit: limit)]
        for i in 10 ..< 50 {
            _ = try tiers[i % 2].write(try encoded("\(i % 2 == 0 ? "app" : "widget") \(i)"))
            #expect(bytesInDirectory() <= limit, "after write \(i)")
            try await nextTick()
        }
    }
}
