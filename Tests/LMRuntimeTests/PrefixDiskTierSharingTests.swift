import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// A directory shared by stores that run at the same time, as an app and its extensions share an
/// app-group container: each store keeps its own index of the files, so these tests open two
/// stores on one directory (two processes' views; nothing in the disk tier is shared in memory).
struct PrefixDiskTierSharingTests {
    let disk = PrefixDiskTierTests()
    var base: PrefixStoreTests { disk.base }

    /// The bytes of every entry file in `directory`.
    func totalBytes(_ directory: URL) throws -> Int { try disk.sizes(in: directory).values.reduce(0, +) }

    /// A store opened before the other wrote anything restores the other's files, whole entries
    /// and token by token, with exact rows.
    @Test(arguments: [false, true])
    func restore_findsFilesAnotherStoreWroteAfterItOpened(encrypted: Bool) throws {
        let directory = disk.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = encrypted ? PrefixStore.EncryptionKey.random() : nil
        let app = base.store(directory: directory, key: key), widget = base.store(directory: directory, key: key)
        let sequence = base.tokens(60, seed: 60)
        app.publish(try base.filled(Array(sequence.prefix(50)), on: base.model), boundaries: [20, 50])
        app.flush()
        let whole = try base.restoreAndCompare(widget, sequence, boundaries: [20, 50, 55])
        #expect(whole.restored == PrefixStore.Restored(fromMemory: 0, fromDisk: 50))
        #expect(whole.logitError <= 1e-4 && whole.rowError <= 1e-4)
        var other = sequence
        other[41] = (other[41] + 1) % disk.weights.config.vocabSize
        let other2 = base.store(directory: directory, key: key)   // and one whose memory has none of it
        app.publish(try base.filled(Array(base.tokens(30, seed: 61)), on: base.model), boundaries: [30])   // a change after it opened
        app.flush()
        let partial = try base.restoreAndCompare(other2, other, boundaries: [20, 55])
        #expect(partial.restored == PrefixStore.Restored(fromMemory: 0, fromDisk: 41))
        #expect(partial.logitError <= 1e-4)
        let late = try base.restoreAndCompare(other2, base.tokens(30, seed: 61) + [1], boundaries: [30])
        #expect(late.restored.fromDisk == 30)
        #expect(widget.statistics.rejectedFiles == 0 && other2.statistics.rejectedFiles == 0)
    }

    /// The byte limit holds for the directory, not for each store's own files: two stores writing
    /// in turn keep the sum of all files within it, and each counts every file.
    @Test func write_keepsTheSharedDirectoryWithinItsByteLimit() throws {
        let directory = disk.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let probe = disk.directory()
        defer { try? FileManager.default.removeItem(at: probe) }
        try disk.persist(base.tokens(20, seed: 39), boundaries: [20], in: probe)   // every 20-token file from position 0 has this size
        let perFile = try totalBytes(probe)
        let stores = (0 ..< 2).map { _ in
            PrefixStore(weights: disk.weights, configuration: .persistent(in: directory, diskByteLimit: 3 * perFile))
        }
        for seed in 70 ..< 78 {
            let store = stores[seed % 2]
            store.publish(try base.filled(base.tokens(20, seed: UInt64(seed)), on: base.model), boundaries: [20])
            store.flush()
            #expect(try totalBytes(directory) <= 3 * perFile, "after \(seed - 69) writes")
            #expect(store.statistics.diskByteCount == (try totalBytes(directory)))
        }
        #expect(disk.files(in: directory).count == 3)
        #expect(stores.map(\.statistics.diskEvictions).reduce(0, +) == 5)
    }

    /// A file another store replaced (a split rewrites the split entry's file as its tail) is
    /// indexed again: this store's count of bytes is the directory's, and both branches restore.
    /// Also when the new file got the old one's inode number back (the system reuses a freed
    /// inode; its size differs): here a hard link keeps the old inode alive, is given the tail's
    /// bytes and is renamed back over the entry's name, so the other store sees its inode unchanged.
    @Test(arguments: [false, true])
    func restore_seesAFileAnotherStoreRewroteAsItsTail(keepingItsInode: Bool) throws {
        let directory = disk.directory(), keep = disk.directory()
        defer { try? FileManager.default.removeItem(at: directory); try? FileManager.default.removeItem(at: keep) }
        try FileManager.default.createDirectory(at: keep, withIntermediateDirectories: true)
        let a = base.tokens(40, seed: 62)
        var b = a
        b[28] = (b[28] + 1) % disk.weights.config.vocabSize
        let app = base.store(directory: directory)
        app.publish(try base.filled(a, on: base.model), boundaries: [40])
        app.flush()
        let file = directory.appendingPathComponent(try #require(disk.files(in: directory).first))
        let held = keep.appendingPathComponent("held")
        if keepingItsInode { try FileManager.default.linkItem(at: file, to: held) }   // the inode stays alive
        let widget = base.store(directory: directory)   // indexes a's whole file
        app.publish(try base.filled(b, on: base.model), boundaries: [40])   // splits a: its file becomes the tail 28..<40
        app.flush()
        if keepingItsInode {
            let tail = try Data(contentsOf: file), handle = try FileHandle(forWritingTo: held)
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: tail)
            try handle.close()
            #expect(rename(held.path, file.path) == 0)
        }
        for tokens in [a, b] {
            let (restored, logitError, _) = try base.restoreAndCompare(widget, tokens + [1], boundaries: [40])
            #expect(restored == PrefixStore.Restored(fromMemory: 0, fromDisk: 40))
            #expect(logitError <= 1e-4)
            #expect(widget.statistics.diskByteCount == (try totalBytes(directory)))
        }
        #expect(widget.statistics.diskEntryCount == 3 && widget.statistics.rejectedFiles == 0)
    }

    /// Opening a store removes the temporary files of writers that are gone, and leaves those of
    /// live processes (this one, or another) that may still be writing them.
    @Test func open_removesOnlyTemporaryFilesWhoseWriterIsGone() throws {
        let directory = disk.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try disk.persist(base.tokens(20, seed: 63), boundaries: [20], in: directory)
        let finished = Process()   // a process that has exited: its id names no process now
        finished.executableURL = URL(fileURLWithPath: "/bin/true")
        try finished.run()
        finished.waitUntilExit()
        let live = [".tmp-\(getpid())-\(UUID().uuidString)", ".tmp-1-\(UUID().uuidString)"]   // this process, and init
        let gone = [".tmp-\(finished.processIdentifier)-\(UUID().uuidString)", ".tmp-\(UUID().uuidString).kvp"]   // the last: no id
        for name in live + gone { try Data([1, 2, 3]).write(to: directory.appendingPathComponent(name)) }
        let store = base.store(directory: directory)
        #expect(store.statistics.removedTemporaryFiles == 2)
        #expect(Set(disk.files(in: directory).filter { $0.hasPrefix(".tmp-") }) == Set(live))
        #expect(store.statistics.diskEntryCount == 1)
    }
}
