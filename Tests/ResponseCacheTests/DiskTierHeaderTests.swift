import Foundation
@testable import ResponseCache
import Testing

/// The disk tier's knowledge of its files' keys and creation times: a targeted removal reads the
/// header of a file only when the tier has not seen that version of it, and what it knows never
/// outlives the file (another process's rewrite, touch or removal).
struct DiskTierHeaderTests {
    let directory = temporaryDirectory()
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func key(_ i: Int, tags: Set<String>) -> CacheKey { CacheKey(parts: ["entry \(i)"], tags: tags) }

    func write(_ tier: DiskTier<String>, _ i: Int, tags: Set<String>) throws {
        _ = try tier.write(Envelope(key: key(i, tags: tags), created: start.addingTimeInterval(Double(i)), value: "value \(i)").encoded())
    }

    /// The entries in the directory, each file decoded on its own, independently of any tier.
    func entriesInDirectory() -> [Int: Set<String>] {
        var found: [Int: Set<String>] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] where name.hasSuffix(DiskTier<String>.suffix) {
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path),
                  let envelope = try? JSONDecoder().decode(Envelope<String>.self, from: data) else { continue }
            found[Int(envelope.value.dropFirst("value ".count))!] = envelope.key.tags
        }
        return found
    }

    /// After every change: the tier's byte count is the directory's, and `expected` is what it holds.
    func check(_ tier: DiskTier<String>, _ expected: [Int: Set<String>], _ step: String) {
        let bytes = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(DiskTier<String>.suffix) }
            .map { (try? FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent($0).path)[.size] as? Int) ?? 0 }
            .reduce(0, +)
        #expect(tier.byteCount == bytes, "\(step)")
        #expect(entriesInDirectory() == expected, "\(step)")
    }

    /// Another process's change has to move the status-change time past what this one recorded;
    /// file time stamps advance by a clock tick of a few milliseconds.
    func nextTick() async throws { try await Task.sleep(for: .milliseconds(20)) }

    @Test func removeAll_readsOnlyTheHeadersOfFilesItHasNotSeen() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = try DiskTier<String>(directory: directory, byteLimit: 1 << 20)
        var expected: [Int: Set<String>] = [:]
        for i in 0 ..< 30 {
            let tags: Set<String> = i % 2 == 0 ? ["even"] : ["odd"]
            try write(app, i, tags: tags)
            expected[i] = tags
        }
        check(app, expected, "written")

        // What it wrote, it knows.
        #expect(app.removeAll { key, _ in key.tags.contains("odd") } == 15)
        expected = expected.filter { $0.value != ["odd"] }
        check(app, expected, "odd removed")
        #expect(app.headerReads == 0)

        // What it read or touched, it still knows.
        #expect((try app.read(key(4, tags: []).digest).get())?.envelope.key.tags == ["even"])
        app.touch(key(6, tags: []).digest)
        #expect(app.removeAll { _, created in created < start.addingTimeInterval(3) } == 2)   // 0 and 2
        expected[0] = nil
        expected[2] = nil
        check(app, expected, "the oldest removed")
        #expect(app.headerReads == 0)

        // Another process writes two entries, rewrites one of this one's with another tag, and
        // touches another: those four are read, once.
        try await nextTick()
        let widget = try DiskTier<String>(directory: directory, byteLimit: 1 << 20)
        try write(widget, 100, tags: ["odd"])
        try write(widget, 101, tags: ["even"])
        try write(widget, 8, tags: ["odd"])
        widget.touch(key(10, tags: []).digest)
        expected[100] = ["odd"]
        expected[101] = ["even"]
        expected[8] = ["odd"]
        check(app, expected, "the other process's changes")
        #expect(app.removeAll { key, _ in key.tags.contains("odd") } == 2)   // 100 and the rewritten 8
        expected[100] = nil
        expected[8] = nil
        check(app, expected, "odd removed again")
        #expect(app.headerReads == 4 && app.knownHeaderCount == expected.count)
        #expect(app.removeAll { key, _ in key.tags.contains("none") } == 0)
        #expect(app.headerReads == 4)

        // A file another process removed is forgotten, and a file written again under that name
        // is read for what it says now.
        try await nextTick()
        widget.remove(key(12, tags: []).digest)
        widget.remove(key(14, tags: []).digest)
        try write(widget, 12, tags: ["odd"])
        expected[12] = ["odd"]
        expected[14] = nil
        #expect(app.removeAll { key, _ in key.tags.contains("odd") } == 1)
        expected[12] = nil
        check(app, expected, "12 rewritten and removed, 14 removed")
        #expect(app.headerReads == 5 && app.knownHeaderCount == expected.count)

        // A new process reads every header once.
        let relaunched = try DiskTier<String>(directory: directory, byteLimit: 1 << 20)
        #expect(relaunched.removeAll { key, _ in key.tags.contains("odd") } == 0)
        #expect(relaunched.headerReads == expected.count)
        #expect(relaunched.removeAll { key, _ in key.tags.contains("even") } == expected.count)
        #expect(relaunched.headerReads == expected.count)
        check(relaunched, [:], "all removed")
        #expect(relaunched.knownHeaderCount == 0)
    }
}
