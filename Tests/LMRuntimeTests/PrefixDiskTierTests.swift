import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// The prefix store's disk tier: a new store on the same directory (as after a relaunch)
/// restores exact rows; every kind of bad file is a miss that is removed and reported.
struct PrefixDiskTierTests {
    let base = PrefixStoreTests()
    var weights: ModelWeights { base.weights }

    func directory() -> URL { Fixtures.temporaryFile("prefix-store") }

    func files(in directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    /// Publishes `sequence` at `boundaries` through a store on `directory` and waits for the writes.
    func persist(_ sequence: [Int], boundaries: [Int], in directory: URL, key: PrefixStore.EncryptionKey? = nil) throws {
        let store = base.store(directory: directory, key: key)
        store.publish(try base.filled(sequence, on: base.model), boundaries: boundaries)
        store.flush()
        #expect(store.statistics.diskWrites == boundaries.count && store.statistics.diskWriteFailures == 0)
    }

    @Test func restore_inANewStoreReadsExactRowsFromDisk() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let sequence = base.tokens(70, seed: 30)
        try persist(Array(sequence.prefix(60)), boundaries: [25, 60], in: directory)
        let relaunched = base.store(directory: directory)
        let (restored, logitError, rowError) = try base.restoreAndCompare(relaunched, sequence, boundaries: [25, 60, 65])
        #expect(restored == PrefixStore.Restored(fromMemory: 0, fromDisk: 60))
        #expect(logitError <= 1e-4 && rowError <= 1e-4)
        #expect(relaunched.checkInvariants() == nil && relaunched.statistics.diskHits == 1)
        // Disk rows go straight into the cache; they join memory when that cache is published.
        let again = try base.restoreAndCompare(relaunched, sequence, boundaries: [60])
        #expect(again.restored == PrefixStore.Restored(fromMemory: 0, fromDisk: 60))
        relaunched.publish(try base.filled(Array(sequence.prefix(60)), on: base.model), boundaries: [25, 60])
        relaunched.flush()
        #expect(relaunched.statistics.diskWrites == 0)   // the files were there: nothing written twice
        let third = try base.restoreAndCompare(relaunched, sequence, boundaries: [60])
        #expect(third.restored == PrefixStore.Restored(fromMemory: 60, fromDisk: 0))
    }

    /// After a relaunch, files are matched token by token too (their ids are indexed when the
    /// store opens; an encrypted file's ids box is opened for that, not its rows): a query that
    /// differs inside a stored entry restores the rows before the difference from disk, the file's
    /// rows beyond it only filling scratch.
    @Test(arguments: [false, true])
    func restore_inANewStoreMatchesFilesTokenByToken(encrypted: Bool) throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = encrypted ? PrefixStore.EncryptionKey.random() : nil
        let sequence = base.tokens(60, seed: 33)
        try persist(Array(sequence.prefix(50)), boundaries: [20, 50], in: directory, key: key)
        var other = sequence
        other[37] = (other[37] + 1) % weights.config.vocabSize     // differs inside the second file
        let cases: [(tokens: [Int], boundaries: [Int], restored: Int, partial: Bool)] = [
            (other, [20, 55], 37, true),
            (sequence, [30], 30, true),                          // never past the last boundary (20 is not one here)
            (sequence, [20, 50, 55], 50, false),                 // a whole chain either way
        ]
        for c in cases {
            let relaunched = base.store(directory: directory, key: key)   // nothing in memory
            let (restored, logitError, rowError) = try base.restoreAndCompare(relaunched, c.tokens, boundaries: c.boundaries)
            #expect(restored == PrefixStore.Restored(fromMemory: 0, fromDisk: c.restored))
            #expect(logitError <= 1e-4 && rowError <= 1e-4)
            let statistics = relaunched.statistics
            #expect(statistics.diskHits == (c.restored > 0 ? 1 : 0) && statistics.partialHits == (c.partial ? 1 : 0))
            #expect(statistics.rejectedFiles == 0)
            #expect(relaunched.checkInvariants() == nil)
        }
        // A session's own cache already holding part of the prefix: the disk fills in the rest.
        let relaunched = base.store(directory: directory, key: key)
        let (restored, logitError, _) = try base.restoreAndCompare(relaunched, other, boundaries: [20, 55], have: 10)
        #expect(restored == PrefixStore.Restored(fromMemory: 0, fromDisk: 37 - 10))
        #expect(logitError <= 1e-4)
    }

    /// A split in memory writes the head as a file of its own, so the branch published after it
    /// (whose file names the head as its parent) restores after a relaunch, and rewrites the split
    /// entry's file as its tail (the rows past the head, the head as its parent): the disk holds
    /// the shared rows once, as memory does, and both branches still restore whole.
    @Test(arguments: [false, true])
    func restore_aBranchPublishedBySplittingAnEntry(encrypted: Bool) throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = encrypted ? PrefixStore.EncryptionKey.random() : nil
        let a = base.tokens(40, seed: 35)
        var b = a
        b[28] = (b[28] + 1) % weights.config.vocabSize
        let store = base.store(directory: directory, key: key)
        store.publish(try base.filled(a, on: base.model), boundaries: [40])
        store.publish(try base.filled(b, on: base.model), boundaries: [40])
        store.flush()
        #expect(store.statistics.splits == 1 && store.statistics.diskWrites == 4 && store.statistics.diskWriteFailures == 0)
        let header = try Data(contentsOf: directory.appendingPathComponent(fileName(a, 40, key: key))).prefix(96)
        #expect(header[20 ..< 24].elementsEqual([28, 0, 0, 0]))   // starts where b parts from a
        #expect(header[64 ..< 96].map { String(format: "%02x", $0) }.joined() + ".kvp" == fileName(a, 28, key: key))   // its parent's file
        let sizes = try sizes(in: directory)
        #expect(sizes.count == 3 && sizes[fileName(a, 40, key: key)] == sizes[fileName(b, 40, key: key)])   // two tails of 12 rows
        for sequence in [a, b] {
            let relaunched = base.store(directory: directory, key: key)
            let (restored, logitError, rowError) = try base.restoreAndCompare(relaunched, sequence + [1], boundaries: [40])
            #expect(restored == PrefixStore.Restored(fromMemory: 0, fromDisk: 40))
            #expect(logitError <= 1e-4 && rowError <= 1e-4 && relaunched.statistics.rejectedFiles == 0)
        }
    }

    /// A file whose parent was evicted cannot be restored; the next best match is used instead.
    @Test func restore_fallsBackFromAFileWhoseParentIsGone() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = base.tokens(50, seed: 34), vocabulary = weights.config.vocabSize
        var b = Array(a.prefix(45))
        b[30] = (b[30] + 1) % vocabulary
        try persist(a, boundaries: [20, 50], in: directory)
        try persist(b, boundaries: [30, 45], in: directory)
        let store = base.store(directory: directory)
        let parent = PrefixKey.keys(fingerprint: store.fingerprint, tokens: a, at: [20])[0]
        try FileManager.default.removeItem(at: directory.appendingPathComponent("\(parent).kvp"))
        var query = a + [1, 2, 3]
        query[40] = (query[40] + 1) % vocabulary
        let relaunched = base.store(directory: directory)
        let (restored, logitError, _) = try base.restoreAndCompare(relaunched, query, boundaries: [52])
        #expect(restored == PrefixStore.Restored(fromMemory: 0, fromDisk: 30))   // b's first file, not a's orphan (40)
        #expect(logitError <= 1e-4 && relaunched.statistics.rejectedFiles == 0)
    }

    /// Rows restored into a ``GrowingKVCache`` (page-aligned blocks) from plain files are mostly
    /// mapped, not copied: bit for bit the rows that were written; private, so writing the cache
    /// never changes a file; independent of the files once restored (they may be removed); and
    /// still exact after the cache grows past its allocation (the mapped rows are copied then).
    @Test func restore_mapsWholePagesOfPlainFilesCopyOnWrite() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(contextLength: 512, dim: 128))   // rows of 256 bytes
        let model = Transformer(weights: weights), c = weights.config
        func cache() -> GrowingKVCache {   // 128 positions × 256 bytes: every block starts on a page
            GrowingKVCache(layerCount: c.layerCount, kvDim: c.kvDim, capacity: c.contextLength, chunkPositions: 128)
        }
        func rows(_ cache: GrowingKVCache, _ range: Range<Int>) -> [Float] {
            (0 ..< c.layerCount).flatMap { cache.keys(layer: $0).rows(range).toArray() + cache.values(layer: $0).rows(range).toArray() }
        }
        let sequence = Fixtures.tokens(count: 400, vocabSize: c.vocabSize, seed: 50), boundaries = [37, 150, 300]
        let source = cache()
        try model.forward(Array(sequence.prefix(300)), cache: source)
        let writer = PrefixStore(weights: weights, configuration: .persistent(in: directory))
        writer.publish(source, boundaries: boundaries)
        writer.flush()

        let store = PrefixStore(weights: weights, configuration: .persistent(in: directory))
        let restored = cache()
        #expect(store.restore(into: restored, tokens: Array(sequence.prefix(310)), boundaries: boundaries).fromDisk == 300)
        let sourceRows = rows(source, 0 ..< 300)
        let restoredExactly = rows(restored, 0 ..< 300) == sourceRows   // (not inside #expect: it would print every row)
        #expect(restoredExactly)
        let s = store.statistics, bytes = 300 * 2 * c.layerCount * c.kvDim * 4
        #expect(s.diskBytesMapped + s.diskBytesRead == bytes)
        #expect(s.diskBytesMapped >= bytes / 2, "mapped \(s.diskBytesMapped) of \(bytes) bytes")

        // Overwrite restored rows (a different continuation from position 100): the files keep theirs.
        restored.truncate(to: 100)
        try model.forward(Fixtures.tokens(count: 50, vocabSize: c.vocabSize, seed: 51), cache: restored)
        let again = cache()
        #expect(PrefixStore(weights: weights, configuration: .persistent(in: directory))
            .restore(into: again, tokens: Array(sequence.prefix(310)), boundaries: boundaries).fromDisk == 300)
        let filesUnchanged = rows(again, 0 ..< 300) == sourceRows
        #expect(filesUnchanged)

        // The files go; the restored rows stay. Growing past the allocation copies them, exactly.
        store.removeAll(includingDisk: true)
        #expect(files(in: directory).isEmpty)
        let logits = try model.forward(Array(sequence[300...]), cache: again).toArray()   // 300 → 400 positions: grows
        let fresh = try model.forward(sequence, cache: model.makeCache()).toArray()
        #expect(Fixtures.maxRelativeError(logits, fresh) <= 1e-4)
        #expect(try again.deviationFromFreshPrefill(model).maxRelativeError <= 1e-4)
        #expect(again.allocatedPositions == 512)

        // A cache in ordinary memory reads the same rows.
        let rewriter = PrefixStore(weights: weights, configuration: .persistent(in: directory))
        rewriter.publish(source, boundaries: boundaries)
        rewriter.flush()
        let dense = DenseKVCache(layerCount: c.layerCount, kvDim: c.kvDim, capacity: c.contextLength)
        let reader = PrefixStore(weights: weights, configuration: .persistent(in: directory))
        #expect(reader.restore(into: dense, tokens: Array(sequence.prefix(310)), boundaries: boundaries).fromDisk == 300)
        #expect(reader.statistics.diskBytesMapped == 0 && reader.statistics.diskBytesRead == bytes)
        let denseExactly = (0 ..< c.layerCount).flatMap { dense.keys(layer: $0).rows(0 ..< 300).toArray() + dense.values(layer: $0).rows(0 ..< 300).toArray() } == sourceRows
        #expect(denseExactly)
    }

    /// Random chains of files restored on top of a cache that already holds a random prefix:
    /// whatever the boundaries (so wherever the pages start and end inside each block) the
    /// restored rows are the written rows bit for bit, the rows the cache held before are
    /// untouched (no page mapped over them), and whole pages were mapped.
    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func restore_mappedChainsKeepEveryRowExact(seed: UInt64) throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(contextLength: 512, dim: 128))   // rows of 256 bytes
        let model = Transformer(weights: weights), c = weights.config
        func cache() -> GrowingKVCache {
            GrowingKVCache(layerCount: c.layerCount, kvDim: c.kvDim, capacity: c.contextLength, chunkPositions: 128)
        }
        func rows(_ cache: GrowingKVCache, _ range: Range<Int>) -> [Float] {
            (0 ..< c.layerCount).flatMap { cache.keys(layer: $0).rows(range).toArray() + cache.values(layer: $0).rows(range).toArray() }
        }
        var rng = SeededGenerator(seed: seed)
        let sequence = Fixtures.tokens(count: 400, vocabSize: c.vocabSize, seed: 60 + seed)
        let boundaries = Array(Set((0 ..< Int.random(in: 2 ... 5, using: &rng)).map { _ in Int.random(in: 1 ... 380, using: &rng) })).sorted()
        let last = boundaries[boundaries.count - 1], have = Int.random(in: 0 ..< last, using: &rng)
        let source = cache()
        try model.forward(Array(sequence.prefix(last)), cache: source)
        let writer = PrefixStore(weights: weights, configuration: .persistent(in: directory))
        writer.publish(source, boundaries: boundaries)
        writer.flush()

        let target = cache()
        if have > 0 { try model.forward(Array(sequence.prefix(have)), cache: target) }
        let before = rows(target, 0 ..< have)
        let store = PrefixStore(weights: weights, configuration: .persistent(in: directory))
        let restored = store.restore(into: target, tokens: Array(sequence.prefix(last + 1)), boundaries: boundaries)
        #expect(restored.fromDisk == last - have, "boundaries \(boundaries), have \(have)")
        let keptExactly = rows(target, 0 ..< have) == before, restoredExactly = rows(target, have ..< last) == rows(source, have ..< last)
        #expect(keptExactly && restoredExactly, "boundaries \(boundaries), have \(have)")
        let s = store.statistics
        #expect(s.diskBytesMapped + s.diskBytesRead == (last - have) * 2 * c.layerCount * c.kvDim * 4)
        // A file restoring 32 rows or more (8 KiB per block) holds a whole page wherever it starts.
        let spans = zip([0] + boundaries, boundaries).map { $1 - max($0, have) }
        if spans.contains(where: { $0 >= 32 }) { #expect(s.diskBytesMapped > 0, "boundaries \(boundaries), have \(have)") }
        let logits = try model.forward([sequence[last]], cache: target).toArray()
        let fresh = try model.forward(Array(sequence.prefix(last + 1)), cache: model.makeCache()).toArray()
        #expect(Fixtures.maxRelativeError(logits, fresh) <= 1e-4)
    }

    /// A chain of files restored in parallel, the first part from memory: the file that holds
    /// the boundary of the memory's end is read from there on (its earlier rows only feed the
    /// checksum), and every row equals a fresh prefill.
    /// Plain files are read in place; encrypted ones are decrypted whole first: both paths.
    @Test(arguments: [false, true])
    func restore_aChainPartlyInMemoryReadsTheRestFromDisk(encrypted: Bool) throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let sequence = base.tokens(70, seed: 36)
        let key = encrypted ? PrefixStore.EncryptionKey.random() : nil
        try persist(Array(sequence.prefix(60)), boundaries: [10, 25, 40, 60], in: directory, key: key)
        let relaunched = base.store(directory: directory, key: key)
        relaunched.publish(try base.filled(Array(sequence.prefix(30)), on: base.model), boundaries: [30])
        let (restored, logitError, rowError) = try base.restoreAndCompare(relaunched, sequence, boundaries: [30, 40, 60], have: 5)
        #expect(restored == PrefixStore.Restored(fromMemory: 25, fromDisk: 30))
        #expect(logitError <= 1e-4 && rowError <= 1e-4)
        #expect(relaunched.statistics.rejectedFiles == 0 && relaunched.checkInvariants() == nil)
    }

    /// A corrupt file inside a chain: the chain through it is refused (its rows never counted),
    /// the file is removed and reported, and the longest intact prefix on disk is used instead.
    @Test(arguments: [10, 25, 40])
    func restore_aCorruptFileInAChainFallsBackToTheIntactPrefix(corrupt: Int) throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let sequence = base.tokens(50, seed: 37)
        let boundaries = [10, 25, 40]
        try persist(Array(sequence.prefix(40)), boundaries: boundaries, in: directory)
        let key = PrefixKey.keys(fingerprint: ModelFingerprint(weights), tokens: sequence, at: [corrupt])[0]
        let url = directory.appendingPathComponent("\(key).kvp")
        var data = try Data(contentsOf: url)
        data[data.count - 20] ^= 0x10   // a row byte near the end: only the checksum catches it
        try data.write(to: url)
        let relaunched = base.store(directory: directory)
        let (restored, logitError, rowError) = try base.restoreAndCompare(relaunched, sequence, boundaries: boundaries)
        let intact = boundaries.last { $0 < corrupt } ?? 0
        #expect(restored == PrefixStore.Restored(fromMemory: 0, fromDisk: intact))
        #expect(logitError <= 1e-4 && rowError <= 1e-4)
        #expect(relaunched.statistics.rejectedFiles == 1 && !FileManager.default.fileExists(atPath: url.path))
        #expect(relaunched.statistics.lastDiskError?.contains("checksum mismatch") == true)
    }

    @Test func files_arePrivateAndNamedByDigestOnly() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try persist(base.tokens(30, seed: 31), boundaries: [10, 30], in: directory)
        let names = files(in: directory)
        #expect(names.count == 2)
        #expect(names.allSatisfy { $0.range(of: "^[0-9a-f]{64}\\.kvp$", options: .regularExpression) != nil })
        let fm = FileManager.default
        #expect((try fm.attributesOfItem(atPath: directory.path)[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        for name in names {
            let mode = try fm.attributesOfItem(atPath: directory.appendingPathComponent(name).path)[.posixPermissions]
            #expect((mode as? NSNumber)?.intValue == 0o600)
        }
    }

    /// Each corruption: the file is ignored and removed, the miss reported with its reason, the
    /// tokens recomputed exactly, and the store stays usable.
    @Test(arguments: [("truncated", "size"), ("garbled", "checksum"), ("appended", "size"),
                      ("wrong model", "another model"), ("wrong version", "format version"), ("wrong shape", "shape"),
                      ("wrong alignment", "alignment"), ("renamed", "give the file's name")])
    func read_rejectsABadFileAndRecomputes(fault: String, reason: String) throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let sequence = base.tokens(40, seed: 32)
        try persist(Array(sequence.prefix(30)), boundaries: [30], in: directory)
        let name = try #require(files(in: directory).first)
        let url = directory.appendingPathComponent(name)
        var data = try Data(contentsOf: url)
        func resealed(_ patch: (inout Data) -> Void) -> Data {   // a consistent checksum over a patched header
            var body = Data(data.prefix(data.count - 8))
            patch(&body)
            let checksum = Kernels.checksum(body, 0 ..< body.count)
            return body + Data((0 ..< 8).map { UInt8(truncatingIfNeeded: checksum >> (8 * $0)) })
        }
        switch fault {
        case "truncated": data = data.prefix(data.count / 2)
        case "garbled": data[data.count / 2] ^= 0x5A
        case "appended": data.append(contentsOf: [1, 2, 3])
        case "wrong model": data = resealed { $0[40] ^= 1 }
        case "wrong alignment": data = resealed { $0[28] = 3 }
        case "wrong version": data = resealed { $0[4] = 9 }
        case "wrong shape": data = resealed { $0[16] += 1 }
        default: break
        }
        var target = url
        let other = base.tokens(30, seed: 99)
        if fault == "renamed" {   // a valid file under another prefix's name
            let key = PrefixKey.keys(fingerprint: ModelFingerprint(weights), tokens: other, at: [30])[0]
            target = directory.appendingPathComponent("\(key).kvp")
            try FileManager.default.moveItem(at: url, to: target)
        } else {
            try data.write(to: target)
        }
        let relaunched = base.store(directory: directory)
        let probe = fault == "renamed" ? other + [1] : sequence
        let (restored, logitError, rowError) = try base.restoreAndCompare(relaunched, probe, boundaries: [30])
        #expect(restored.total == 0, "a \(fault) file was used")
        #expect(logitError <= 1e-4 && rowError <= 1e-4)
        let statistics = relaunched.statistics
        #expect(statistics.rejectedFiles == 1 && statistics.lastDiskError?.contains("rejected") == true, "\(fault)")
        #expect(statistics.lastDiskError?.contains(reason) == true, "\(fault): \(statistics.lastDiskError ?? "")")
        #expect(!FileManager.default.fileExists(atPath: target.path), "a \(fault) file was kept")
        #expect(relaunched.checkInvariants() == nil)
    }

    @Test func open_removesTemporaryFilesOfInterruptedWrites() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let sequence = base.tokens(30, seed: 33)
        try persist(sequence, boundaries: [30], in: directory)
        let leftover = directory.appendingPathComponent(".tmp-\(UUID().uuidString).kvp")
        try Data([1, 2, 3]).write(to: leftover)
        let foreign = directory.appendingPathComponent("notes.txt")
        try Data("not ours".utf8).write(to: foreign)
        let relaunched = base.store(directory: directory)
        #expect(relaunched.statistics.removedTemporaryFiles == 1)
        #expect(!FileManager.default.fileExists(atPath: leftover.path))
        #expect(FileManager.default.fileExists(atPath: foreign.path))   // never touches what is not its own
        #expect(try base.restoreAndCompare(relaunched, sequence + [1], boundaries: [30]).restored.fromDisk == 30)
    }

    @Test func open_anUnusableDirectoryLeavesTheStoreInMemory() throws {
        let file = Fixtures.temporaryFile("not-a-directory")
        try Data("x".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let store = base.store(directory: file.appendingPathComponent("kv"))
        #expect(!store.persists)
        #expect(store.statistics.lastDiskError?.contains("cannot use the directory") == true)
        let sequence = base.tokens(30, seed: 34)
        store.publish(try base.filled(sequence, on: base.model), boundaries: [30])
        #expect(try base.restoreAndCompare(store, sequence + [1], boundaries: [30]).restored.fromMemory == 30)
    }

    @Test func encryption_readsUnderItsKeyOnlyAndHidesTheTokens() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = PrefixStore.EncryptionKey.random()
        let sequence = Array(repeating: 0x41, count: 30)   // a plain file would hold 41 00 00 00 thirty times
        try persist(sequence, boundaries: [30], in: directory, key: key)
        let name = try #require(files(in: directory).first)
        let data = try Data(contentsOf: directory.appendingPathComponent(name))
        #expect(data.range(of: Data([0x41, 0, 0, 0, 0x41, 0, 0, 0])) == nil)
        let same = base.store(directory: directory, key: key)
        #expect(try base.restoreAndCompare(same, sequence + [1], boundaries: [30]).restored.fromDisk == 30)
        #expect(throws: PrefixStoreError.invalidEncryptionKey(byteCount: 5)) { try PrefixStore.EncryptionKey(bytes: [1, 2, 3, 4, 5]) }
    }

    /// An encrypted store names its files by a keyed hash: not the plain key's name, which anyone
    /// with the model could compute from a guessed prompt, and not another key's. So stores under
    /// two keys on one directory each restore their own files and leave the other's alone.
    @Test func encryption_namesFilesByAKeyedHashThatAnotherKeysStoreLeavesAlone() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = [PrefixStore.EncryptionKey.random(), .random()]
        let sequence = base.tokens(40, seed: 61)
        for key in keys { try persist(sequence, boundaries: [20, 40], in: directory, key: key) }
        let names = Set(keys.flatMap { key in [20, 40].map { fileName(sequence, $0, key: key) } })
        #expect(Set(files(in: directory)) == names && names.count == 4)
        #expect(names.isDisjoint(with: [20, 40].map { fileName(sequence, $0) }))
        // A parent is named by its file's name too: no plain key stands in any header.
        for name in names {
            let header = try Data(contentsOf: directory.appendingPathComponent(name)).prefix(PrefixDiskTier.headerBytes)
            #expect(header.range(of: Data(PrefixKey.keys(fingerprint: ModelFingerprint(weights), tokens: sequence, at: [20])[0].bytes)) == nil)
        }
        for key in keys {
            let store = base.store(directory: directory, key: key)
            #expect(try base.restoreAndCompare(store, sequence + [1], boundaries: [20, 40]).restored.fromDisk == 40)
            #expect(store.statistics.rejectedFiles == 0)
        }
        #expect(Set(files(in: directory)) == names)
    }

    /// An encrypted file's header is authenticated: a file naming another parent (with a checksum
    /// to match) is rejected as not decrypting, and the chain restores up to it.
    @Test func encryption_rejectsAFileWhoseHeaderWasChanged() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = PrefixStore.EncryptionKey.random()
        let sequence = base.tokens(40, seed: 59)
        try persist(sequence, boundaries: [20, 40], in: directory, key: key)
        let url = directory.appendingPathComponent(fileName(sequence, 40, key: key))
        let data = try Data(contentsOf: url)
        var body = Data(data.prefix(data.count - 8))
        body.replaceSubrange(64 ..< 96, with: PrefixKey.keys(fingerprint: ModelFingerprint(weights), tokens: base.tokens(20, seed: 60), at: [20])[0].bytes)
        let checksum = Kernels.checksum(body, 0 ..< body.count)
        try (body + Data((0 ..< 8).map { UInt8(truncatingIfNeeded: checksum >> (8 * $0)) })).write(to: url)
        let relaunched = base.store(directory: directory, key: key)
        #expect(try base.restoreAndCompare(relaunched, sequence + [1], boundaries: [20, 40]).restored.fromDisk == 20)
        #expect(relaunched.statistics.rejectedFiles == 1 && !FileManager.default.fileExists(atPath: url.path))
        #expect(relaunched.statistics.lastDiskError?.contains("does not decrypt") == true)
    }

    /// A plain file's header is not authenticated, but its parent field must name the entry of
    /// its own first tokens: a file naming another parent (checksum to match) is rejected, and the
    /// chain restores up to it.
    @Test func restore_rejectsAFileWhoseHeaderNamesAnotherParent() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let sequence = base.tokens(40, seed: 62)
        try persist(sequence, boundaries: [20, 40], in: directory)
        let url = directory.appendingPathComponent(fileName(sequence, 40))
        let data = try Data(contentsOf: url)
        var body = Data(data.prefix(data.count - 8))
        body.replaceSubrange(64 ..< 96, with: PrefixKey.keys(fingerprint: ModelFingerprint(weights), tokens: base.tokens(20, seed: 63), at: [20])[0].bytes)
        let checksum = Kernels.checksum(body, 0 ..< body.count)
        try (body + Data((0 ..< 8).map { UInt8(truncatingIfNeeded: checksum >> (8 * $0)) })).write(to: url)
        let relaunched = base.store(directory: directory)
        #expect(try base.restoreAndCompare(relaunched, sequence + [1], boundaries: [20, 40]).restored.fromDisk == 20)
        #expect(relaunched.statistics.rejectedFiles == 1 && !FileManager.default.fileExists(atPath: url.path))
        #expect(relaunched.statistics.lastDiskError?.contains("parent named in the header") == true)
    }

    /// An encrypted file whose header and checksum agree on a payload of the wrong size is refused
    /// before it is read whole (a hostile file could claim gigabytes).
    @Test func encryption_refusesAPayloadOfTheWrongSizeBeforeReadingIt() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = PrefixStore.EncryptionKey.random()
        let sequence = base.tokens(30, seed: 38)
        try persist(sequence, boundaries: [30], in: directory, key: key)
        let url = directory.appendingPathComponent(try #require(files(in: directory).first))
        let data = try Data(contentsOf: url)
        var body = Data(data.prefix(data.count - 8)) + Data(repeating: 7, count: 64)
        let payload = UInt64(body.count - PrefixDiskTier.headerBytes), at = PrefixDiskTier.headerBytes - 8   // the payload size field
        for i in 0 ..< 8 { body[at + i] = UInt8(truncatingIfNeeded: payload >> (8 * UInt64(i))) }
        let checksum = Kernels.checksum(body, 0 ..< body.count)
        try (body + Data((0 ..< 8).map { UInt8(truncatingIfNeeded: checksum >> (8 * $0)) })).write(to: url)
        let relaunched = base.store(directory: directory, key: key)
        #expect(try base.restoreAndCompare(relaunched, sequence + [1], boundaries: [30]).restored.total == 0)
        #expect(relaunched.statistics.rejectedFiles == 1 && files(in: directory).isEmpty)
        #expect(relaunched.statistics.lastDiskError?.contains("payload") == true)
    }

    @Test func write_keepsTheDirectoryWithinItsByteLimit() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let probe = self.directory()
        defer { try? FileManager.default.removeItem(at: probe) }
        try persist(base.tokens(20, seed: 39), boundaries: [20], in: probe)   // every 20-token file from position 0 has this size
        let probeFile = probe.appendingPathComponent(try #require(files(in: probe).first))
        let perFile = try #require(try FileManager.default.attributesOfItem(atPath: probeFile.path)[.size] as? NSNumber).intValue
        let store = PrefixStore(weights: weights, configuration: .persistent(in: directory, diskByteLimit: 3 * perFile))
        for seed in 40 ..< 46 {
            store.publish(try base.filled(base.tokens(20, seed: UInt64(seed)), on: base.model), boundaries: [20])
            store.flush()
            #expect(store.statistics.diskByteCount <= 3 * perFile)
        }
        #expect(files(in: directory).count == 3 && store.statistics.diskEvictions == 3)
        store.removeAll(includingDisk: true)
        #expect(files(in: directory).isEmpty && store.statistics.entryCount == 0)
    }

    /// Each file's size, by name.
    func sizes(in directory: URL) throws -> [String: Int] {
        try Dictionary(uniqueKeysWithValues: files(in: directory).map { name in
            let path = directory.appendingPathComponent(name).path
            return (name, try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber).intValue)
        })
    }

    /// The file name of the entry for `tokens[0..<end]` in a store under `key`.
    func fileName(_ tokens: [Int], _ end: Int, key: PrefixStore.EncryptionKey? = nil) -> String {
        PrefixDiskTier.fileName(of: PrefixKey.keys(fingerprint: ModelFingerprint(weights), tokens: tokens, at: [end])[0], encryptionKey: key)
    }

    /// Sets the last use (modification time) of the file for each `tokens[0..<end]` (in a store
    /// under `key`) to `minutes` ago.
    func age(_ files: [(minutes: Int, tokens: [Int], end: Int)], in directory: URL, key: PrefixStore.EncryptionKey? = nil) throws {
        for file in files {
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -60 * Double(file.minutes))],
                                                  ofItemAtPath: directory.appendingPathComponent(fileName(file.tokens, file.end, key: key)).path)
        }
    }

    /// Over the byte limit, the file evicted is the least recently used *leaf*: the older
    /// conversation loses its second span, not its first (the least recently used file), which
    /// the second needs and which alone still restores 20 tokens; every other chain stays whole. The index of parents is built when
    /// the store opens (the files were written by earlier stores), encrypted files included.
    @Test(arguments: [false, true])
    func write_evictsTheOldestLeafSoNoChainLosesItsStart(encrypted: Bool) throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = encrypted ? PrefixStore.EncryptionKey.random() : nil
        let a = base.tokens(40, seed: 50), b = base.tokens(40, seed: 51), c = base.tokens(20, seed: 52)
        try persist(a, boundaries: [20, 40], in: directory, key: key)
        try persist(b, boundaries: [20, 40], in: directory, key: key)
        try age([(40, a, 20), (30, a, 40), (20, b, 20), (10, b, 40)], in: directory, key: key)   // as if an hour apart, each parent older
        let held = try sizes(in: directory).values.reduce(0, +), newFile = try #require(try sizes(in: directory)[fileName(a, 20, key: key)])
        let store = PrefixStore(weights: weights, configuration: .persistent(
            in: directory, diskByteLimit: held + newFile - 1, encryptionKey: key))
        store.publish(try base.filled(c, on: base.model), boundaries: [20])
        store.flush()
        #expect(store.statistics.diskEvictions == 1 && store.statistics.diskByteCount <= held + newFile - 1)
        #expect(Set(files(in: directory)) == Set([(a, 20), (b, 20), (b, 40), (c, 20)].map { fileName($0, $1, key: key) }))
        let relaunched = base.store(directory: directory, key: key)
        for (tokens, expected) in [(a, 20), (b, 40), (c, 20)] {
            let (restored, logitError, _) = try base.restoreAndCompare(relaunched, tokens + [1], boundaries: [20, 40])
            #expect(restored == PrefixStore.Restored(fromMemory: 0, fromDisk: expected) && logitError <= 1e-4)
        }
    }

    /// A file whose parent is gone (removed here, as a rejected file is) goes before any leaf,
    /// even a less recently used one: without its parent's tokens in memory it cannot be restored.
    @Test func write_evictsAFileWhoseParentIsGoneFirst() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = base.tokens(40, seed: 53), b = base.tokens(40, seed: 54), c = base.tokens(20, seed: 55)
        try persist(a, boundaries: [20, 40], in: directory)
        try persist(b, boundaries: [20, 40], in: directory)
        try FileManager.default.removeItem(at: directory.appendingPathComponent(fileName(b, 20)))
        try age([(40, a, 20), (30, a, 40), (10, b, 40)], in: directory)   // a's leaf older than b's orphan
        let held = try sizes(in: directory).values.reduce(0, +), newFile = try #require(try sizes(in: directory)[fileName(a, 20)])
        let store = PrefixStore(weights: weights, configuration: .persistent(in: directory, diskByteLimit: held + newFile - 1))
        store.publish(try base.filled(c, on: base.model), boundaries: [20])
        store.flush()
        #expect(store.statistics.diskEvictions == 1)
        #expect(Set(files(in: directory)) == [fileName(a, 20), fileName(a, 40), fileName(c, 20)])
        #expect(try base.restoreAndCompare(base.store(directory: directory), a + [1], boundaries: [40]).restored.fromDisk == 40)
    }

    /// Files whose (garbled) headers name each other as parents are no leaves, yet the byte limit
    /// still holds: once no leaf is left, the least recently used file goes.
    @Test func write_keepsItsByteLimitWhenFilesNameEachOtherAsParents() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = base.tokens(40, seed: 56), b = base.tokens(40, seed: 57)
        try persist(a, boundaries: [20, 40], in: directory)
        try persist(b, boundaries: [20, 40], in: directory)
        for first in [a, b] { try FileManager.default.removeItem(at: directory.appendingPathComponent(fileName(first, 20))) }
        for (file, parent) in [(a, b), (b, a)] {
            let url = directory.appendingPathComponent(fileName(file, 40))
            var data = try Data(contentsOf: url)
            data.replaceSubrange(64 ..< 96, with: PrefixKey.keys(fingerprint: ModelFingerprint(weights), tokens: parent, at: [40])[0].bytes)
            try data.write(to: url)
        }
        let limit = try sizes(in: directory).values.min()! - 1
        let store = PrefixStore(weights: weights, configuration: .persistent(in: directory, diskByteLimit: limit))
        store.publish(try base.filled(base.tokens(20, seed: 58), on: base.model), boundaries: [20])
        store.flush()
        #expect(store.statistics.diskByteCount <= limit && files(in: directory).isEmpty)
        #expect(store.statistics.diskEvictions == 3)
    }

    /// A directory that stops taking files after the store opened it (deleted here; a full disk
    /// fails the same call): writes fail and are reported, nothing crashes, memory keeps working.
    @Test func write_failuresAreReportedAndTheStoreKeepsWorkingInMemory() throws {
        let directory = directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = base.store(directory: directory)
        try FileManager.default.removeItem(at: directory)
        let sequence = base.tokens(30, seed: 35)
        store.publish(try base.filled(sequence, on: base.model), boundaries: [30])
        store.flush()
        let statistics = store.statistics
        #expect(statistics.diskWrites == 0 && statistics.diskWriteFailures == 1)
        #expect(statistics.lastDiskError?.contains("writing entry") == true)
        #expect(try base.restoreAndCompare(store, sequence + [1], boundaries: [30]).restored.fromMemory == 30)
        #expect(!FileManager.default.fileExists(atPath: directory.path))   // no stray temporary file anywhere
    }
}
