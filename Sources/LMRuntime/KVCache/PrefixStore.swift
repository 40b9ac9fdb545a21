import Foundation

/// K/V rows of token prefixes, shared by every sequence on one model and, with a directory,
/// kept across launches.
///
/// Why it exists: a KV cache row depends on every token before it, so two sessions with the
/// same instructions compute the same rows, and a relaunched app recomputes a whole
/// conversation. Sequences *publish* their rows at segment boundaries (the end of the
/// instructions and tool definitions, the end of each completed turn); a sequence *restores*
/// (copies) the rows of every leading token it shares with a published prefix, as far as the
/// tokens agree, instead of computing them.
///
/// Entries form a tree: each holds the rows of one span `start ..< end` and names its parent,
/// the entry of `tokens[0..<start]`, so a shared prefix is stored once however many turns
/// extend it. Publishing a prefix that parts from a stored entry inside it splits that entry
/// where the tokens part (a radix tree), so two sessions whose instructions differ only in
/// their last line hold the rows above it once. An entry is keyed by ``PrefixKey`` (SHA-256 over the model fingerprint and
/// `tokens[0..<end]`) and checked token for token before use.
///
/// Invariants (checked by ``checkInvariants()``): the bytes held never exceed
/// ``Configuration/memoryByteLimit``; every entry's parent is present, so a chain always
/// reaches position 0; the children of one entry begin with different tokens; pinned entries, entries with children and entries being read are
/// never evicted; eviction takes the least recently used of the rest.
///
/// Why copies and not shared blocks: a hit copies rows into the sequence's own cache
/// (about 24 KiB per token on `base`, a few milliseconds for a thousand tokens against
/// hundreds to recompute them). Referring to shared blocks instead would save that memory
/// per session but make attention read keys from scattered blocks, put block tables behind
/// the ``KVCache`` protocol and tie every cache's lifetime to the store's.
public final class PrefixStore: Sendable {
    /// Limits and the optional disk tier.
    public struct Configuration: Sendable {
        /// Most bytes of K/V rows held in memory.
        public var memoryByteLimit: Int
        /// Where entries persist across launches (`nil`: memory only). The store creates it
        /// (mode 0700) and writes only its own files there; stores in other processes (an app's
        /// extensions, in an app-group container) may share it, with the same key, each seeing
        /// the others' files and the byte limit holding for the directory as a whole.
        public var directory: URL?
        /// Most bytes of entry files on disk. Eviction takes the least recently used file whose
        /// parent is gone, else the least recently used file no other file names as its parent.
        public var diskByteLimit: Int
        /// Encrypts entry files at rest (AES-GCM) when set, and names them by a hash keyed with
        /// it (HMAC): a store under another key never reads them, and leaves them to the byte
        /// limit's eviction. A file under this key's name that does not open under it is a miss,
        /// removed and reported.
        public var encryptionKey: EncryptionKey?

        /// The environment variable that names a directory for the disk tier, so unmodified
        /// app code can opt in to persistence.
        public static let directoryEnvironmentVariable = "KVSESSION_KV_CACHE_DIR"

        /// Memory only, within `memoryByteLimit` (default: 1/16 of physical memory, at most 1 GiB).
        public static func memoryOnly(memoryByteLimit: Int = defaultMemoryByteLimit) -> Configuration {
            Configuration(memoryByteLimit: memoryByteLimit, directory: nil, diskByteLimit: 0, encryptionKey: nil)
        }

        /// Memory plus a directory that persists entries across launches.
        public static func persistent(in directory: URL, diskByteLimit: Int = 2 << 30,
                                      memoryByteLimit: Int = defaultMemoryByteLimit,
                                      encryptionKey: EncryptionKey? = nil) -> Configuration {
            Configuration(memoryByteLimit: memoryByteLimit, directory: directory, diskByteLimit: diskByteLimit,
                          encryptionKey: encryptionKey)
        }

        /// What a model gets unless told otherwise: memory only, or persistent in the directory
        /// that ``directoryEnvironmentVariable`` names.
        public static var standard: Configuration { standard(environment: ProcessInfo.processInfo.environment) }

        /// ``standard`` as it reads `environment`.
        public static func standard(environment: [String: String]) -> Configuration {
            if let path = environment[directoryEnvironmentVariable], !path.isEmpty {
                return .persistent(in: URL(fileURLWithPath: path))
            }
            return .memoryOnly()
        }

        /// 1/16 of physical memory, at most 1 GiB.
        public static var defaultMemoryByteLimit: Int {
            min(1 << 30, Int(clamping: ProcessInfo.processInfo.physicalMemory / 16))
        }
    }

    /// Where restored tokens came from.
    public struct Restored: Sendable, Equatable {
        /// Tokens copied from entries already in memory.
        public var fromMemory = 0
        /// Tokens read from the disk tier's files.
        public var fromDisk = 0
        /// All restored tokens.
        public var total: Int { fromMemory + fromDisk }

        /// Counts of restored tokens (none by default).
        public init(fromMemory: Int = 0, fromDisk: Int = 0) {
            self.fromMemory = fromMemory
            self.fromDisk = fromDisk
        }
    }

    /// Counters since the store was made.
    public struct Statistics: Sendable, Equatable {
        /// Entries in memory, their bytes, and how many are pinned or being read now.
        public var entryCount = 0, byteCount = 0, pinnedEntryCount = 0, readerCount = 0
        /// Restores that found a prefix in memory (possibly extended from disk), or only on disk.
        public var memoryHits = 0, diskHits = 0
        /// Tokens restored from memory and from disk.
        public var tokensFromMemory = 0, tokensFromDisk = 0
        /// Restores whose rows from memory end inside a stored entry: where its tokens stop
        /// matching, or at the restore's last boundary (see ``PrefixStore/restore(into:tokens:boundaries:)``).
        public var partialHits = 0
        /// Entries split in two because a sequence published a prefix that parts from theirs
        /// inside them: the shared rows stay in one entry instead of being stored again.
        public var splits = 0
        /// Entries evicted from memory, and insertions refused because pinned or busy entries
        /// left no room.
        public var evictions = 0, refusedInsertions = 0
        /// The disk tier: entries written, write failures, files evicted for the byte limit,
        /// files that failed validation (removed), temporary files from interrupted writes
        /// removed at open, and the files and bytes it holds now.
        public var diskWrites = 0, diskWriteFailures = 0, diskEvictions = 0, rejectedFiles = 0
        public var removedTemporaryFiles = 0, diskEntryCount = 0, diskByteCount = 0
        /// Bytes of K/V rows restores took from files: mapped (whole pages of a file backing the
        /// cache's own pages, copy-on-write; needs a ``GrowingKVCache`` and plain files) and read.
        public var diskBytesMapped = 0, diskBytesRead = 0
        /// The last disk problem (no prompt text: file names are key digests).
        public var lastDiskError: String?
    }

    /// One stored span of rows.
    final class Entry: @unchecked Sendable {   // mutable fields only under the store's lock; rows immutable
        let key: PrefixKey
        let parent: PrefixKey?
        /// The whole prefix `tokens[0..<end]` (checked against the caller's tokens on every hit).
        let tokens: [Int]
        /// First position whose rows this entry holds.
        let start: Int
        /// `[layerCount][keys, values][end - start][kvDim]`.
        let rows: FloatBuffer
        var lastUse: UInt64 = 0
        var pins = 0, children = 0, readers = 0

        init(key: PrefixKey, parent: PrefixKey?, tokens: [Int], start: Int, rows: FloatBuffer) {
            self.key = key
            self.parent = parent
            self.tokens = tokens
            self.start = start
            self.rows = rows
        }

        var end: Int { tokens.count }
        var byteCount: Int { rows.byteCount }
    }

    struct State {
        var entries: [PrefixKey: Entry] = [:]
        var byteCount = 0
        var clock: UInt64 = 0
        var statistics = Statistics()
    }

    /// The model these rows belong to.
    public let fingerprint: ModelFingerprint
    /// The shape of the rows.
    public let layerCount: Int, kvDim: Int
    /// The limits and directory.
    public let configuration: Configuration
    let state = Locked(State())
    let disk: PrefixDiskTier?

    /// A store for rows of the model with `fingerprint` and shape `layerCount × kvDim`.
    ///
    /// With a directory, opening it removes temporary files left by interrupted writes; a
    /// directory that cannot be created or written leaves the store memory-only, with the
    /// error in ``statistics``.
    public init(fingerprint: ModelFingerprint, layerCount: Int, kvDim: Int, configuration: Configuration = .standard) {
        self.fingerprint = fingerprint
        self.layerCount = layerCount
        self.kvDim = kvDim
        self.configuration = configuration
        var opened: PrefixDiskTier?
        var statistics = Statistics()
        if let directory = configuration.directory {
            do {
                opened = try PrefixDiskTier(directory: directory, fingerprint: fingerprint, layerCount: layerCount,
                                            kvDim: kvDim, byteLimit: configuration.diskByteLimit,
                                            encryptionKey: configuration.encryptionKey)
            } catch {
                statistics.lastDiskError = "\(error)"
            }
        }
        disk = opened
        state.withLock { $0.statistics = statistics }
    }

    /// A store for `weights`' rows.
    public convenience init(weights: ModelWeights, configuration: Configuration = .standard) {
        self.init(fingerprint: ModelFingerprint(weights), layerCount: weights.config.layerCount,
                  kvDim: weights.config.kvDim, configuration: configuration)
    }

    /// Bytes one entry of `count` positions takes.
    func byteCount(positions count: Int) -> Int { 2 * layerCount * kvDim * count * MemoryLayout<Float>.stride }

    /// The counters, with the disk tier's current size.
    public var statistics: Statistics {
        var s = state.withLock { state in
            var s = state.statistics
            s.entryCount = state.entries.count
            s.byteCount = state.byteCount
            s.pinnedEntryCount = state.entries.values.filter { $0.pins > 0 }.count
            s.readerCount = state.entries.values.map(\.readers).reduce(0, +)
            return s
        }
        if let disk {
            let d = disk.statistics
            s.diskWrites = d.writes
            s.diskWriteFailures = d.writeFailures
            s.diskEvictions = d.evictions
            s.rejectedFiles = d.rejectedFiles
            s.removedTemporaryFiles = d.removedTemporaryFiles
            s.diskEntryCount = d.entryCount
            s.diskByteCount = d.byteCount
            s.diskBytesMapped = d.bytesMapped
            s.diskBytesRead = d.bytesRead
            s.lastDiskError = d.lastError ?? s.lastDiskError
        }
        return s
    }

    /// Whether entries also persist in a directory.
    public var persists: Bool { disk != nil }

    /// Waits until every entry published so far has been written to disk (or failed).
    public func flush() { disk?.flush() }

    /// Drops every unpinned entry from memory and, with `disk`, every entry file too.
    public func removeAll(includingDisk: Bool = false) {
        state.withLock { s in
            while evictOne(&s) {}
        }
        if includingDisk { disk?.removeAll() }
    }

    /// Checks the store's invariants; returns the first violation, or `nil`.
    public func checkInvariants() -> String? {
        state.withLock { s in
            let bytes = s.entries.values.map(\.byteCount).reduce(0, +)
            if bytes != s.byteCount { return "byte count \(s.byteCount) != sum of entries \(bytes)" }
            if s.byteCount > configuration.memoryByteLimit { return "\(s.byteCount) bytes exceed the limit \(configuration.memoryByteLimit)" }
            for entry in s.entries.values {
                if entry.start == 0 { if entry.parent != nil { return "an entry at 0 names a parent" } ; continue }
                guard let parentKey = entry.parent, let parent = s.entries[parentKey] else { return "an entry's parent is missing" }
                if parent.end != entry.start { return "an entry does not start where its parent ends" }
                if !parent.tokens.elementsEqual(entry.tokens[0 ..< entry.start]) { return "an entry's tokens do not extend its parent's" }
            }
            for entry in s.entries.values {
                let children = s.entries.values.filter { $0.parent == entry.key }.count
                if children != entry.children { return "an entry counts \(entry.children) children, has \(children)" }
            }
            var firstTokens: [PrefixKey?: Set<Int>] = [:]   // of each parent's children
            for entry in s.entries.values where !firstTokens[entry.parent, default: []].insert(entry.tokens[entry.start]).inserted {
                return "two entries extending the same parent start with the same token (rows held twice)"
            }
            return nil
        }
    }
}
