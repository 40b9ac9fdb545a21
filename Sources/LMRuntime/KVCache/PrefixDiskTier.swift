import AtomicFiles
import CKernels
import Crypto
import Foundation
import Synchronization

extension PrefixStore {
    /// A 256-bit key that encrypts the disk tier's files at rest (AES-GCM).
    public struct EncryptionKey: Sendable {
        /// The raw key (kept as bytes: swift-crypto's `SymmetricKey` is not `Sendable`).
        private let bytes: [UInt8]

        /// A key from 32 bytes the app keeps (in the keychain, say).
        /// - Throws: ``PrefixStoreError/invalidEncryptionKey(byteCount:)`` for any other length.
        public init(bytes: [UInt8]) throws {
            guard bytes.count == 32 else { throw PrefixStoreError.invalidEncryptionKey(byteCount: bytes.count) }
            self.bytes = bytes
        }

        /// A new random key (from the system's cryptographically secure generator).
        public static func random() -> EncryptionKey {
            var generator = SystemRandomNumberGenerator()
            // 32 bytes always make a valid key.
            return try! EncryptionKey(bytes: (0 ..< 32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
        }

        var key: SymmetricKey { SymmetricKey(data: bytes) }

        /// The key that names an encrypted store's files (HMAC-SHA256), derived from this one
        /// (HKDF-SHA256) so that the encryption key itself serves one purpose only.
        var namingKey: SymmetricKey {
            HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Data("KVSession prefix-store file names".utf8), outputByteCount: 32)
        }
    }
}

/// The prefix store's files: one per entry, named by its key's hex digest (encrypted: by the hex
/// digest of an HMAC of its key under a key derived from the store's, see below), written atomically
/// (temporary file, then rename) with mode 0600 in a 0700 directory of the store's own, and
/// validated in full before use.
///
/// File layout (little-endian), version 3:
///
/// | offset | size | field |
/// | --- | --- | --- |
/// | 0 | 4 | magic `KVPX` |
/// | 4 | 4 | format version |
/// | 8 | 4 | flags (1: payload encrypted) |
/// | 12 | 4 | layer count |
/// | 16 | 4 | kvDim |
/// | 20 | 4 | start: first position whose rows the file holds |
/// | 24 | 4 | end: the prefix's token count |
/// | 28 | 4 | alignment: a power of two, the writer's page size (1 when encrypted) |
/// | 32 | 32 | model fingerprint |
/// | 64 | 32 | parent: the name of the entry file of `tokens[0..<start]` (zeros when start is 0) |
/// | 96 | 8 | payload byte count |
/// | 104 | n | payload: `end` token ids (u32), then for each block `[layer][keys, values]` zero padding and the block's rows `[end - start][kvDim]` (f32); with encryption, the ids and the rows (no padding) each sealed in an AES-GCM box of their own (nonce, ciphertext, tag) |
/// | 104 + n | 8 | checksum of everything before it (``Kernels/checksum(_:_:)``: a fast 64-bit hash) |
///
/// The padding (less than `alignment` bytes per block) puts each block's row of position `p` at a
/// file offset equal to `p × rowBytes` modulo the alignment, which is where that row sits within
/// a page of a ``GrowingKVCache`` (its blocks start on page boundaries). A restore into such a
/// cache therefore maps the whole pages of each block from the file (private, copy-on-write)
/// and reads only the partial pages at either end: page-cache pages map at a fraction of the
/// cost of filling fresh memory with them.
///
/// An encrypted store names its files, and their parents in the header, by HMAC-SHA256 of the
/// entry's key under a key derived from its own (HKDF): the plain key is a hash of the model and
/// the token ids, so whoever had the model and the directory could otherwise confirm a guessed
/// prompt by hashing it; and stores under different keys on one directory never share a name.
///
/// An encrypted file's ids box authenticates the header too, and its rows box the header and the
/// ids box, so no field, and no box taken from another file, passes unnoticed. The ids sit in a
/// box of their own so that opening a store decrypts a few KB per file, not its rows: encrypted
/// files are then indexed and matched token by token like plain ones.
///
/// The checksum is a fast non-cryptographic hash (about 10 GB/s; SHA-256 at 1.6 GB/s took 45 ms of a
/// 3,000-token restore on `base`): it catches truncation and corruption; whoever can write the
/// directory could forge either, and encrypted files are authenticated by AES-GCM's tag anyway.
///
/// A file is used only if every field agrees with the store (version, model, shape), the sizes
/// add up, the checksum matches, both boxes open under the current key (or the payload is plain
/// when there is none), and the token ids give the file's name and its parent's. Anything else is a
/// miss: the file is removed and counted in ``PrefixStore/Statistics/rejectedFiles``.
///
/// The index, like the files, is keyed by file names; the store's calls name entries by their
/// ``PrefixKey``, which ``name(_:)`` turns into file names.
final class PrefixDiskTier: @unchecked Sendable {   // mutable state under `state`; writes on `queue`
    struct Statistics {
        var writes = 0, writeFailures = 0, evictions = 0, rejectedFiles = 0, removedTemporaryFiles = 0
        var entryCount = 0, byteCount = 0
        /// Bytes of rows restores took by mapping file pages, and by reading (or decrypting) them.
        var bytesMapped = 0, bytesRead = 0
        var lastError: String?
    }

    /// What the index knows of one entry file.
    private struct IndexedFile {
        var bytes: Int
        /// When it was last written or read.
        var lastUse: Date
        /// The file its header names as its parent (`nil`: it starts at position 0, or its
        /// header does not fit this store).
        var parent: PrefixKey?
        /// The entry's own key (`nil` where its token ids could not be read, or do not give its name).
        var key: PrefixKey?
        /// The first position whose rows it holds (`nil`: not known).
        var start: Int?
        /// The token ids of its whole prefix, for matching token by token (`nil`: not known).
        var tokens: [Int]?
        /// The file's inode number: a file replaced since (renamed over) has another.
        var inode: UInt64
    }

    private struct State {
        var files: [PrefixKey: IndexedFile] = [:]
        var statistics = Statistics()
        /// The directory's modification time at the last scan and when that scan began (ns since 1970).
        var lastScan: (changed: Int, began: Int)?
    }

    static let magic: [UInt8] = Array("KVPX".utf8)
    /// 3: encrypted files seal the ids and the rows apart (2 sealed them together).
    static let version: UInt32 = 3
    /// What AES-GCM's combined box adds to what it seals: a 12-byte nonce and a 16-byte tag.
    static let sealOverhead = 28
    static let headerBytes = 104, checksumBytes = 8
    /// Largest alignment a file may declare (64 KiB pages exist; nothing larger does).
    static let maximumAlignment = 1 << 16
    static let fileExtension = "kvp"
    static let temporaryPrefix = ".tmp-"

    let directory: URL
    let fingerprint: ModelFingerprint
    let layerCount: Int, kvDim: Int
    let byteLimit: Int
    let encryptionKey: PrefixStore.EncryptionKey?
    /// ``PrefixStore/EncryptionKey/namingKey`` of `encryptionKey`.
    private let namingKey: SymmetricKey?
    private let state = Locked(State())
    private let queue = DispatchQueue(label: "LMRuntime.PrefixDiskTier")

    /// Opens (creating it, mode 0700) `directory`, removes temporary files left by writers that
    /// are gone (killed mid-write; never one a live process is writing), and indexes the entry files.
    /// - Throws: ``PrefixStoreError/directoryUnusable(path:reason:)``.
    init(directory: URL, fingerprint: ModelFingerprint, layerCount: Int, kvDim: Int, byteLimit: Int,
         encryptionKey: PrefixStore.EncryptionKey?) throws {
        self.directory = directory
        self.fingerprint = fingerprint
        self.layerCount = layerCount
        self.kvDim = kvDim
        self.byteLimit = byteLimit
        self.encryptionKey = encryptionKey
        namingKey = encryptionKey?.namingKey
        let fm = FileManager.default
        do {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true,
                                   attributes: [.posixPermissions: 0o700])
        } catch {
            throw PrefixStoreError.directoryUnusable(path: directory.path, reason: "\(error.localizedDescription)")
        }
        guard fm.isWritableFile(atPath: directory.path) else {
            throw PrefixStoreError.directoryUnusable(path: directory.path, reason: "not writable")
        }
        synchronize()
    }

    /// Brings the index up to date with the directory, which other processes may write and evict
    /// in too (an app and its extensions sharing an app-group container): files not in the index
    /// are indexed from their headers, files replaced since (another inode or another size: a tail
    /// rewrite, whose file may get a freed inode number back) are indexed again, files gone are
    /// dropped, each file's last use becomes the later of the index's and its modification time
    /// (another process's restores touch it), and temporary files whose writer is gone are
    /// removed. A `stat` per file, headers only for new ones.
    /// Nothing is listed while the directory is as it was at the last scan: the same
    /// modification time, and that scan began over a second after it (two changes in one clock
    /// tick leave the time as the first one set it).
    private func synchronize() {
        var status = stat()
        guard stat(directory.path, &status) == 0 else { return }
        let changed = Self.modified(status), began = Self.nanoseconds(Date())
        if let last = state.withLock({ $0.lastScan }), last.changed == changed, last.began - changed > 1_000_000_000 { return }
        let known = state.withLock { $0.files.mapValues { (inode: $0.inode, bytes: $0.bytes) } }
        var listed: [PrefixKey: (inode: UInt64, bytes: Int, modified: Date, header: IndexedHeader?)] = [:]
        var removedTemporary = 0
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] {
            let path = directory.appendingPathComponent(name).path
            if AtomicFile.isTemporary(name, marker: Self.temporaryPrefix) {
                if AtomicFile.isAbandoned(name, marker: Self.temporaryPrefix), unlink(path) == 0 { removedTemporary += 1 }
                continue
            }
            guard let named = Self.key(fromFileName: name), lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
                continue   // not ours: left alone
            }
            let inode = UInt64(status.st_ino), bytes = Int(status.st_size)
            let header = known[named].map { $0.inode == inode && $0.bytes == bytes } == true ? nil
                : indexedHeader(of: URL(fileURLWithPath: path), named: named, size: bytes)
            listed[named] = (inode, bytes, Date(timeIntervalSince1970: Double(Self.modified(status)) / 1e9), header)
        }
        let scanStart = Date(timeIntervalSince1970: Double(began) / 1e9)
        state.withLock { s in
            for (key, file) in listed {
                if let header = file.header {
                    s.files[key] = IndexedFile(bytes: file.bytes, lastUse: file.modified, parent: header.parent,
                                               key: header.key, start: header.start, tokens: header.tokens, inode: file.inode)
                } else if s.files[key]?.inode == file.inode {
                    s.files[key]!.bytes = file.bytes
                    s.files[key]!.lastUse = max(s.files[key]!.lastUse, file.modified)
                }
            }
            // Gone from the directory, unless this store wrote or used it after the listing began.
            s.files = s.files.filter { listed[$0.key] != nil || $0.value.lastUse >= scanStart }
            s.statistics.removedTemporaryFiles += removedTemporary
            s.lastScan = (changed, began)
        }
        updateCounts()
    }

    /// A `stat`'s modification time, in nanoseconds since 1970.
    private static func modified(_ status: stat) -> Int {
        #if canImport(Darwin)
        let time = status.st_mtimespec
        #else
        let time = status.st_mtim
        #endif
        return Int(time.tv_sec) * 1_000_000_000 + Int(time.tv_nsec)
    }
    private static func nanoseconds(_ date: Date) -> Int { Int(date.timeIntervalSince1970 * 1e9) }

    /// What the index takes from a file's header (``indexedHeader(of:named:size:)``).
    private typealias IndexedHeader = (parent: PrefixKey?, start: Int?, tokens: [Int]?, key: PrefixKey?)

    /// What the entry file `named` says, for the index: the parent it names, where its span
    /// starts, and the token ids it holds, read from the payload (a few KB; an encrypted file's ids
    /// box is opened, which also authenticates the header), with the key they give; `nil` where
    /// the header does not fit this store, and ids and key `nil` where the ids cannot be read or do
    /// not give the file's name. Nothing else is checked here: a restore checks the whole file
    /// before using it.
    private func indexedHeader(of url: URL, named: PrefixKey, size: Int) -> IndexedHeader {
        guard size >= Self.headerBytes + Self.checksumBytes else { return (nil, nil, nil, nil) }
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return (nil, nil, nil, nil) }
        defer { close(descriptor) }
        guard let header = try? Self.read(descriptor, Self.headerBytes, at: 0),
              let (span, parent, _, _) = try? checkHeader(header, fileSize: size, tokens: nil) else { return (nil, nil, nil, nil) }
        let idsBytes = 4 * span.upperBound + (encryptionKey == nil ? 0 : Self.sealOverhead)
        guard idsBytes <= size - Self.headerBytes - Self.checksumBytes,   // ids a garbled header claims: never more than the file
              let bytes = try? Self.read(descriptor, idsBytes, at: Self.headerBytes),
              let ids = encryptionKey == nil ? Data(bytes) : try? unseal(Data(bytes), authenticating: Data(header)) else {
            return (parent, span.lowerBound, nil, nil)
        }
        let key = PrefixKey.key(fingerprint: fingerprint, littleEndianTokenIDs: [UInt8](ids))
        guard name(key) == named else { return (parent, span.lowerBound, nil, nil) }   // another format's, or garbled
        return (parent, span.lowerBound, Self.tokenIDs([UInt8](ids)), key)
    }

    /// Little-endian 32-bit token ids.
    private static func tokenIDs(_ bytes: [UInt8]) -> [Int] {
        bytes.withUnsafeBytes { raw in
            (0 ..< bytes.count / 4).map { Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self))) }
        }
    }

    /// The indexed files whose token ids agree furthest with `tokens[0..<limit]`, beyond
    /// `above`: at most `count` of them, furthest first (then the more recently used), each with
    /// its key, how far it agrees, and its ids (what its chain is checked against). More than
    /// one, because a file whose parent was evicted cannot be restored from position `above`.
    func longestMatches(_ tokens: [Int], limit: Int, above: Int, count: Int = 4) -> [(key: PrefixKey, end: Int, tokens: [Int])] {
        synchronize()   // files another process wrote since
        return state.withLock { s in
            var found: [(key: PrefixKey, end: Int, tokens: [Int], lastUse: Date)] = []
            for file in s.files.values {
                guard let key = file.key, let ids = file.tokens, min(ids.count, limit) > above else { continue }
                let stop = min(ids.count, limit)
                var agreed = 0
                while agreed < stop, ids[agreed] == tokens[agreed] { agreed += 1 }
                if agreed > above { found.append((key, agreed, ids, file.lastUse)) }
            }
            return found.sorted { ($0.end, $0.lastUse) > ($1.end, $1.lastUse) }.prefix(count).map { ($0.key, $0.end, $0.tokens) }
        }
    }

    var statistics: Statistics { state.withLock { $0.statistics } }

    func contains(_ key: PrefixKey) -> Bool { state.withLock { $0.files[name(key)] != nil } }

    func flush() { queue.sync {} }

    /// Removes every entry file.
    func removeAll() {
        queue.sync {
            let names = state.withLock { Array($0.files.keys) }
            for name in names { remove(name) }
        }
    }

    /// Writes `entry` in the background (atomically; a failure is counted and reported).
    /// A file already held for the key (rows restored from disk and published again) is only
    /// marked as used: same key, same tokens, same model, so the same rows.
    func write(_ entry: PrefixStore.Entry, rows: [Matrix]) {
        queue.async { [self] in
            if contains(entry.key) {
                let now = Date()
                try? FileManager.default.setAttributes([.modificationDate: now], ofItemAtPath: fileURL(name(entry.key)).path)
                state.withLock { $0.files[name(entry.key)]?.lastUse = now }
                return
            }
            store(entry, rows: rows)
        }
    }

    /// After a split in memory, replaces in the background the file of the entry that was split
    /// (holding its rows from its old start) by one of `tail`, the rest, whose parent is the head
    /// written just before: so the disk, too, holds the rows the two branches share once. Nothing
    /// is written unless the split entry's file is there and starts before the tail (else there is
    /// nothing to shrink) and so is the head's (else the tail could not be read). The rename is
    /// atomic: a reader opens the old file or the new one, each valid, and a mapping of the old
    /// one keeps its pages.
    func shrink(to tail: PrefixStore.Entry, rows: [Matrix]) {
        queue.async { [self] in
            guard let head = tail.parent, state.withLock({ s in
                s.files[name(head)] != nil && s.files[name(tail.key)].map { ($0.start ?? 0) < tail.start } == true
            }) else { return }
            store(tail, rows: rows)
        }
    }

    /// Writes `entry`'s file atomically (temporary file, then rename) and indexes it; a failure
    /// is counted and reported. On `queue`.
    private func store(_ entry: PrefixStore.Entry, rows: [Matrix]) {
        do {
            let data = try encode(entry, rows: rows)
            let written = try AtomicFile.write(data, to: fileURL(name(entry.key)), marker: Self.temporaryPrefix, durable: true)
            state.withLock { s in
                s.files[name(entry.key)] = IndexedFile(bytes: written.bytes, lastUse: Date(), parent: entry.parent.map(name),
                                                       key: entry.key, start: entry.start, tokens: entry.tokens, inode: written.inode)
                s.statistics.writes += 1
            }
            evictOverLimit()
        } catch {
            state.withLock { s in
                s.statistics.writeFailures += 1
                s.statistics.lastError = "writing entry \(entry.key): \(error)"
            }
        }
        updateCounts()
    }

    /// Validates the file of `key` and its ancestors back to position `from`, writing their rows
    /// for positions `from ..< end` into `cache`'s rows (its scratch rows: the caller appends the
    /// tokens only when this returns `true`). An invalid file is removed and reported; a missing
    /// one is a plain miss.
    ///
    /// First every file's header and token ids are checked (a few KB each); then the whole pages
    /// of rows the cache's storage allows are mapped from the files (copy-on-write); then on all
    /// worker threads the rest is read, each file straight into the cache (no copy in between),
    /// and every byte checksummed (the mapped ones through the mapping), while still in cache.
    /// - Precondition: `cache` has room (``KVCache/reserve(positions:)``) for the key's prefix.
    func restore(_ key: PrefixKey, tokens: [Int], into cache: some KVCache, from: Int) -> Bool {
        var chain: [ChainFile] = []
        defer { for file in chain { close(file.descriptor) } }
        var next: PrefixKey? = name(key)   // then each file's parent, as its header names it
        while let current = next {
            guard let file = openChecked(current, tokens: tokens) else { return false }
            chain.append(file)
            next = file.span.lowerBound > from ? file.parent : nil
            if next == nil, file.span.lowerBound > from { return false }   // unreachable: start > 0 always names a parent
        }
        let targets = (0 ..< layerCount).map { [cache.keys(layer: $0), cache.values(layer: $0)] }
        let mapped = chain.map { mapPages(of: $0, into: targets, from: from) }   // one thread: it changes the address space
        let failures = Locked<[(PrefixKey, String)]>([])
        let claimed = Atomic<Int>(0)
        Kernels.parallelWorkers(min(chain.count, Kernels.threadCount)) { _ in
            while case let i = claimed.add(1, ordering: .relaxed).oldValue, i < chain.count {
                do { try loadRows(of: chain[i], into: targets, from: from, mapped: mapped[i]) } catch {
                    failures.withLock { $0.append((chain[i].key, "\(error)")) }
                }
            }
        }
        for (failed, reason) in failures.withLock({ $0 }) { reject(failed, reason: reason) }
        guard failures.withLock({ $0.isEmpty }) else { return false }
        let rowBytes = 4 * 2 * layerCount * kvDim * (chain[0].span.upperBound - from)   // chain[0] is the key's own file
        let mappedBytes = 4 * mapped.joined().map(\.count).reduce(0, +)
        let now = Date()
        for file in chain { _ = futimens(file.descriptor, nil) }   // last use, for the LRU across launches
        state.withLock { s in
            for file in chain { s.files[file.key]?.lastUse = now }
            s.statistics.bytesMapped += mappedBytes
            s.statistics.bytesRead += rowBytes - mappedBytes
        }
        return true
    }

    /// A file of a restore chain whose header and token ids checked out.
    private struct ChainFile {
        /// Its name (see ``name(_:)``).
        let key: PrefixKey
        let descriptor: Int32
        /// Positions whose rows the file holds.
        let span: Range<Int>
        let parent: PrefixKey?
        let rows: RowSource
    }

    /// Where a checked file's rows come from.
    private enum RowSource {
        /// A plain file: block `b`'s rows start at `blocks[b]` (the padding before it from the end
        /// of the previous one), and the checksum (which has covered the header and token ids)
        /// is finished over padding and rows and compared with the file's last 8 bytes.
        case file(blocks: [Int], checksum: kv_checksum_state, fileSize: Int)
        /// An encrypted file, read, checksummed, authenticated and decrypted whole: block `b`'s
        /// rows start at `blocks[b]` in `payload` (the rows box's plaintext).
        case decrypted(payload: Data, blocks: [Int])
    }

    /// Opens the file named `key` and checks everything but a plain file's rows; `nil` when it is
    /// missing or invalid (an invalid file is removed and reported).
    private func openChecked(_ key: PrefixKey, tokens: [Int]) -> ChainFile? {
        let descriptor = open(fileURL(key).path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            state.withLock { _ = $0.files.removeValue(forKey: key) }
            updateCounts()
            return nil
        }
        do {
            let file = try checkedFile(key, descriptor: descriptor, tokens: tokens)
            return file
        } catch let problem as Problem {
            close(descriptor)
            if case .otherTokens = problem { return nil }   // a valid file for other tokens (a digest collision): leave it
            reject(key, reason: problem.description)
            return nil
        } catch {
            close(descriptor)
            reject(key, reason: "\(error)")
            return nil
        }
    }

    private func checkedFile(_ key: PrefixKey, descriptor: Int32, tokens: [Int]) throws -> ChainFile {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw Problem.invalid("cannot stat (errno \(errno))") }
        let size = Int(status.st_size)
        guard size >= Self.headerBytes + Self.checksumBytes else {
            throw Problem.invalid("truncated: \(size) bytes, shorter than a header")
        }
        let header = try Self.read(descriptor, Self.headerBytes, at: 0)
        let (span, parent, alignment, payloadCount) = try checkHeader(header, fileSize: size, tokens: tokens)
        if encryptionKey != nil {
            let blocks = blockOffsets(span: span, rowsStart: 0, alignment: alignment)
            let idsEnd = Self.headerBytes + Self.sealOverhead + 4 * span.upperBound
            let expected = 2 * Self.sealOverhead + 4 * span.upperBound + blocks[blocks.count - 1]
            guard payloadCount == expected else { throw Problem.invalid("payload \(payloadCount) bytes, expected \(expected)") }
            let body = Data(try Self.read(descriptor, size, at: 0)), bodyEnd = Self.headerBytes + payloadCount
            guard Kernels.checksum(body, 0 ..< bodyEnd) == Self.littleEndian(body[bodyEnd...]) else {
                throw Problem.invalid("checksum mismatch")
            }
            let ids = try unseal(body[Self.headerBytes ..< idsEnd], authenticating: body[0 ..< Self.headerBytes])
            try checkTokens([UInt8](ids), named: key, start: span.lowerBound, parent: parent, tokens: tokens)
            let rows = try unseal(body[idsEnd ..< bodyEnd], authenticating: body[0 ..< idsEnd])
            return ChainFile(key: key, descriptor: descriptor, span: span, parent: parent,
                             rows: .decrypted(payload: rows, blocks: blocks))
        }
        let blocks = blockOffsets(span: span, rowsStart: Self.headerBytes + 4 * span.upperBound, alignment: alignment)
        guard payloadCount == blocks[blocks.count - 1] - Self.headerBytes else {
            throw Problem.invalid("payload \(payloadCount) bytes, expected \(blocks[blocks.count - 1] - Self.headerBytes)")
        }
        let tokenBytes = try Self.read(descriptor, 4 * span.upperBound, at: Self.headerBytes)
        try checkTokens(tokenBytes, named: key, start: span.lowerBound, parent: parent, tokens: tokens)
        var checksum = kv_checksum_state()
        kv_checksum64_begin(&checksum)
        kv_checksum64_update(&checksum, header, header.count)
        kv_checksum64_update(&checksum, tokenBytes, tokenBytes.count)
        return ChainFile(key: key, descriptor: descriptor, span: span, parent: parent,
                         rows: .file(blocks: blocks, checksum: checksum, fileSize: size))
    }

    /// Checks a header against the store and the file's size: the span, the parent, the alignment
    /// and the payload's byte count.
    private func checkHeader(_ bytes: [UInt8], fileSize: Int, tokens: [Int]?) throws
        -> (span: Range<Int>, parent: PrefixKey?, alignment: Int, payloadCount: Int) {
        func invalid(_ reason: String) -> Problem { .invalid(reason) }
        func u32(_ offset: Int) -> Int { Int(Self.littleEndian(bytes[offset ..< offset + 4])) }
        guard Array(bytes[0 ..< 4]) == Self.magic else { throw invalid("not a prefix-store file (magic)") }
        guard u32(4) == Int(Self.version) else { throw invalid("format version \(u32(4)), expected \(Self.version)") }
        let encrypted = u32(8) & 1 == 1
        guard encrypted == (encryptionKey != nil) else {
            throw invalid(encrypted ? "encrypted, but no key is set" : "not encrypted, but a key is set")
        }
        guard u32(12) == layerCount, u32(16) == kvDim else {
            throw invalid("shape \(u32(12)) layers × \(u32(16)), expected \(layerCount) × \(kvDim)")
        }
        let start = u32(20), end = u32(24)
        guard start < end, end <= tokens?.count ?? Int(Int32.max) else { throw invalid("span \(start)..<\(end) out of range") }
        let alignment = u32(28)
        guard alignment > 0, alignment & (alignment - 1) == 0, alignment <= Self.maximumAlignment else {
            throw invalid("alignment \(alignment) is not a power of two up to \(Self.maximumAlignment)")
        }
        guard Array(bytes[32 ..< 64]) == fingerprint.bytes else { throw invalid("written for another model") }
        let parentBytes = Array(bytes[64 ..< 96])
        let parent = parentBytes.allSatisfy { $0 == 0 } ? nil : PrefixKey(bytes: parentBytes)
        guard (start == 0) == (parent == nil) else { throw invalid("parent key disagrees with start \(start)") }
        let payloadCount = Self.littleEndian(bytes[96 ..< 104])
        guard payloadCount <= UInt64(fileSize), fileSize == Self.headerBytes + Int(payloadCount) + Self.checksumBytes else {
            throw invalid("size \(fileSize) bytes, header says \(UInt64(Self.headerBytes + Self.checksumBytes) &+ payloadCount)")
        }
        return (start ..< end, parent, alignment, Int(payloadCount))
    }

    /// Checks that the token ids of the file `named` give its name, and their first `start` its
    /// parent's, and that they are the sequence's first tokens.
    private func checkTokens(_ bytes: [UInt8], named: PrefixKey, start: Int, parent: PrefixKey?, tokens: [Int]) throws {
        guard name(PrefixKey.key(fingerprint: fingerprint, littleEndianTokenIDs: bytes)) == named else {
            throw Problem.invalid("token ids do not give the file's name")
        }
        if let parent, name(PrefixKey.key(fingerprint: fingerprint, littleEndianTokenIDs: Array(bytes[0 ..< 4 * start]))) != parent {
            throw Problem.invalid("the parent named in the header is not the entry of the file's first \(start) tokens")
        }
        guard Self.tokenIDs(bytes).elementsEqual(tokens.prefix(bytes.count / 4)) else { throw Problem.otherTokens }
    }

    /// Maps the whole pages of `file`'s rows for positions `from...` over `targets` where the
    /// cache's storage allows it (plain files only); the floats mapped, per block.
    private func mapPages(of file: ChainFile, into targets: [[Matrix]], from: Int) -> [Range<Int>] {
        guard case let .file(blocks, _, _) = file.rows else { return [] }
        let first = max(file.span.lowerBound, from), skippedBytes = 4 * kvDim * (first - file.span.lowerBound)
        return (0 ..< 2 * layerCount).map { block in
            Kernels.mapFilePages(file.descriptor, at: blocks[block] + skippedBytes,
                                 over: targets[block / 2][block % 2].rows(first ..< file.span.upperBound))
        }
    }

    /// Loads `file`'s rows for positions `from...` into `targets` (`[layer][keys, values]`), the
    /// floats of each block in `mapped` being the file's already; padding and rows before `from`
    /// are read too, only for the checksum.
    private func loadRows(of file: ChainFile, into targets: [[Matrix]], from: Int, mapped: [Range<Int>]) throws {
        let first = max(file.span.lowerBound, from), skippedBytes = 4 * kvDim * (first - file.span.lowerBound)
        switch file.rows {
        case let .decrypted(payload, blocks):
            for layer in 0 ..< layerCount {
                for slot in 0 ..< 2 {
                    Kernels.loadLittleEndianFloats(from: payload, byteOffset: blocks[2 * layer + slot] + skippedBytes,
                                                   into: targets[layer][slot].rows(first ..< file.span.upperBound))
                }
            }
        case .file(let blocks, var checksum, let fileSize):
            var offset = Self.headerBytes + 4 * file.span.upperBound
            do {
                for layer in 0 ..< layerCount {
                    for slot in 0 ..< 2 {
                        offset = try Kernels.hashFileBytes(file.descriptor, at: offset,
                                                           count: blocks[2 * layer + slot] + skippedBytes - offset, checksum: &checksum)
                        offset = try Kernels.readLittleEndianFloats(file.descriptor, at: offset,
                                                                    into: targets[layer][slot].rows(first ..< file.span.upperBound),
                                                                    checksum: &checksum, mapped: mapped[2 * layer + slot])
                    }
                }
            } catch { throw Problem.invalid("\(error)") }
            precondition(offset == fileSize - Self.checksumBytes, "block offsets were checked against the header")
            guard kv_checksum64_end(&checksum) == Self.littleEndian(try Self.read(file.descriptor, Self.checksumBytes, at: offset)[...]) else {
                throw Problem.invalid("checksum mismatch")
            }
        }
    }

    /// Where each block `[layer][keys, values]` of a file for `span` starts (and, last, where the
    /// rows end), given where the rows begin: each block is padded so that its row of position `p`
    /// lies at `p × rowBytes` modulo `alignment` (see the type's documentation).
    private func blockOffsets(span: Range<Int>, rowsStart: Int, alignment: Int) -> [Int] {
        let rowBytes = 4 * kvDim, target = span.lowerBound * rowBytes % alignment
        var offsets: [Int] = [], cursor = rowsStart
        for _ in 0 ..< 2 * layerCount {
            cursor += ((target - cursor) % alignment + alignment) % alignment
            offsets.append(cursor)
            cursor += span.count * rowBytes
        }
        return offsets + [cursor]
    }

    /// Exactly `count` bytes of the file at `offset`.
    private static func read(_ descriptor: Int32, _ count: Int, at offset: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw Problem.invalid(n == 0 ? "truncated while reading" : "read failed (errno \(errno))") }
            done += n
        }
        return bytes
    }

    /// The little-endian unsigned integer in `bytes` (at most 8 of them).
    private static func littleEndian(_ bytes: some Collection<UInt8>) -> UInt64 {
        bytes.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * $1.offset) }
    }

    // MARK: - Format

    enum Problem: Error, CustomStringConvertible {
        case invalid(String)
        case otherTokens

        var description: String {
            switch self {
            case let .invalid(reason): reason
            case .otherTokens: "holds other tokens"
            }
        }
    }

    private func encode(_ entry: PrefixStore.Entry, rows: [Matrix]) throws -> Data {
        let encrypted = encryptionKey != nil
        let alignment = encrypted ? 1 : min(Kernels.pageSize, Self.maximumAlignment)
        var ids = Data()
        ids.reserveCapacity(4 * entry.end)
        for token in entry.tokens { Self.append(UInt32(truncatingIfNeeded: token), to: &ids) }
        // Plain, the rows follow the ids in the file (padded to the alignment); encrypted, they are a box of their own.
        let rowsStart = encrypted ? 0 : Self.headerBytes + ids.count
        let blocks = blockOffsets(span: entry.start ..< entry.end, rowsStart: rowsStart, alignment: alignment)
        var rowBytes = Data()
        rowBytes.reserveCapacity(blocks[blocks.count - 1] - rowsStart)
        for (m, blockStart) in zip(rows, blocks) {
            rowBytes.append(Data(count: blockStart - rowsStart - rowBytes.count))
            Kernels.appendLittleEndianFloats(m, to: &rowBytes)
        }
        var data = Data(Self.magic)
        for field in [Self.version, encrypted ? 1 : 0, UInt32(layerCount), UInt32(kvDim),
                      UInt32(entry.start), UInt32(entry.end), UInt32(alignment)] { Self.append(field, to: &data) }
        data.append(contentsOf: fingerprint.bytes)
        data.append(contentsOf: entry.parent.map(name)?.bytes ?? [UInt8](repeating: 0, count: 32))
        Self.append(UInt64(ids.count + rowBytes.count + (encrypted ? 2 * Self.sealOverhead : 0)), to: &data)
        if encrypted {
            data.append(try seal(ids, authenticating: data))
            data.append(try seal(rowBytes, authenticating: data))
        } else {
            data.append(ids)
            data.append(rowBytes)
        }
        Self.append(Kernels.checksum(data, 0 ..< data.count), to: &data)
        return data
    }

    /// `message` in AES-GCM's combined box (nonce, ciphertext, tag: ``sealOverhead`` bytes more)
    /// under the store's key, the tag also covering `context`.
    private func seal(_ message: Data, authenticating context: Data) throws -> Data {
        guard let encryptionKey,
              let box = try AES.GCM.seal(message, using: encryptionKey.key, authenticating: context).combined else {
            throw Problem.invalid("AES-GCM gave no combined box")
        }
        return box
    }

    /// The plaintext of a box ``seal(_:authenticating:)`` made with the same `context`.
    private func unseal(_ box: Data, authenticating context: Data) throws -> Data {
        guard let encryptionKey else { throw Problem.invalid("no key to decrypt with") }
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: box), using: encryptionKey.key, authenticating: context)
        } catch {
            throw Problem.invalid("does not decrypt under the current key")
        }
    }

    // MARK: - Files

    /// The name of the file of the entry `key`: the key itself, or, encrypted, its HMAC.
    private func name(_ key: PrefixKey) -> PrefixKey { Self.name(key, namingKey: namingKey) }

    private static func name(_ key: PrefixKey, namingKey: SymmetricKey?) -> PrefixKey {
        guard let namingKey else { return key }
        return PrefixKey(bytes: Array(HMAC<SHA256>.authenticationCode(for: key.bytes, using: namingKey)))!   // 32 bytes
    }

    /// The file name of the entry `key` in a store under `encryptionKey` (for tests and tools).
    package static func fileName(of key: PrefixKey, encryptionKey: PrefixStore.EncryptionKey?) -> String {
        "\(name(key, namingKey: encryptionKey?.namingKey)).\(fileExtension)"
    }

    /// The file named `name` (see ``name(_:)``).
    private func fileURL(_ name: PrefixKey) -> URL {
        directory.appendingPathComponent("\(name).\(Self.fileExtension)")
    }

    private static func key(fromFileName name: String) -> PrefixKey? {
        let parts = name.split(separator: ".")
        guard parts.count == 2, parts[1] == fileExtension, parts[0].count == 64 else { return nil }
        var bytes: [UInt8] = []
        var index = parts[0].startIndex
        while index < parts[0].endIndex {
            let next = parts[0].index(index, offsetBy: 2)
            guard let byte = UInt8(parts[0][index ..< next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return PrefixKey(bytes: bytes)
    }

    /// Removes the file named `key` and counts it as rejected.
    private func reject(_ key: PrefixKey, reason: String) {
        remove(key)
        state.withLock { s in
            s.statistics.rejectedFiles += 1
            s.statistics.lastError = "entry \(key) rejected: \(reason)"
        }
    }

    private func remove(_ key: PrefixKey) {
        try? FileManager.default.removeItem(at: fileURL(key))
        state.withLock { _ = $0.files.removeValue(forKey: key) }
        updateCounts()
    }

    /// Removes files until the directory is within the byte limit. A file is needed by every file
    /// that names it as parent (a restore reads a chain back to where the cache or memory has the
    /// tokens), so, as the memory tier does, eviction takes leaves: first, least recently used
    /// first, the files whose parent is gone (they can only be restored over their parent's tokens
    /// held in memory: never after a relaunch), then the files no other file names as its parent.
    /// A chain on disk thus loses its last span first and never its first one (the instructions,
    /// which every conversation that shares them needs). Should only files naming one another be
    /// left (garbled headers), the least recently used of all goes.
    private func evictOverLimit() {
        synchronize()   // the limit holds for the directory, whoever wrote its files
        while true {
            let victim: PrefixKey? = state.withLock { s in
                guard s.files.values.map(\.bytes).reduce(0, +) > byteLimit else { return nil }
                let parents = Set(s.files.compactMap { key, file in file.parent == key ? nil : file.parent })
                let orphans = s.files.filter { $0.value.parent.map { s.files[$0] == nil } ?? false }
                let leaves = s.files.filter { !parents.contains($0.key) }
                let oldest = { (files: [PrefixKey: IndexedFile]) in files.min { $0.value.lastUse < $1.value.lastUse }?.key }
                return oldest(orphans) ?? oldest(leaves) ?? oldest(s.files)
            }
            guard let victim else { return }
            remove(victim)
            state.withLock { $0.statistics.evictions += 1 }
        }
    }

    private func updateCounts() {
        state.withLock { s in
            s.statistics.entryCount = s.files.count
            s.statistics.byteCount = s.files.values.map(\.bytes).reduce(0, +)
        }
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to data: inout Data) {
        data.append(contentsOf: (0 ..< MemoryLayout<T>.size).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) })
    }
}
