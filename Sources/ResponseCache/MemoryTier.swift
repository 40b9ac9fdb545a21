import Foundation

/// An in-memory LRU bounded by entry count and bytes.
struct MemoryTier<Value: Sendable> {
    struct Entry: Sendable {
        var key: CacheKey
        var value: Value
        var created: Date
        var bytes: Int
        /// The identifier of the stored generation (``Envelope/id``).
        var id: UUID? = nil
        /// The version of the disk tier's file this value is also in, and when this process last
        /// marked that file as used (`nil`: not on disk).
        var file: (version: FileVersion, touched: Date)? = nil
    }

    let entryLimit: Int
    let byteLimit: Int
    /// Each entry with the stamp of its last use.
    private var entries: [String: (entry: Entry, used: UInt64)] = [:]
    /// Uses in order, least recent first from `head`; a use is current while its stamp is its
    /// entry's, so touching or removing an entry leaves its earlier uses behind to be skipped
    /// (and compacted away once they outnumber the entries), and every operation is O(1) amortised.
    private var uses: [(digest: String, stamp: UInt64)] = []
    private var head = 0
    private var stamp: UInt64 = 0
    private(set) var bytes = 0

    init(entryLimit: Int, byteLimit: Int) {
        self.entryLimit = entryLimit
        self.byteLimit = byteLimit
    }

    mutating func get(_ digest: String) -> Entry? {
        guard let entry = entries[digest]?.entry else { return nil }
        use(digest)
        return entry
    }

    /// Inserts (or replaces) an entry; returns how many entries were evicted.
    mutating func put(_ entry: Entry) -> Int {
        remove(entry.key.digest)
        entries[entry.key.digest] = (entry, 0)
        use(entry.key.digest)
        bytes += entry.bytes
        var evicted = 0
        while entries.count > entryLimit || (bytes > byteLimit && entries.count > 1), let oldest = leastRecentlyUsed() {
            remove(oldest)
            evicted += 1
        }
        return evicted
    }

    /// Records which version of its disk file holds `digest`'s value, and when it was last marked as used.
    mutating func setFile(_ digest: String, _ file: (version: FileVersion, touched: Date)?) {
        entries[digest]?.entry.file = file
    }

    mutating func remove(_ digest: String) {
        guard let removed = entries.removeValue(forKey: digest) else { return }
        bytes -= removed.entry.bytes
    }

    mutating func removeAll(where predicate: (Entry) -> Bool) {
        for (digest, held) in entries where predicate(held.entry) { remove(digest) }
    }

    var count: Int { entries.count }

    /// The digests held, least recently used first (tests).
    var digestsByUse: [String] { uses[head...].filter { entries[$0.digest]?.used == $0.stamp }.map(\.digest) }

    private mutating func use(_ digest: String) {
        stamp += 1
        entries[digest]?.used = stamp
        uses.append((digest, stamp))
        if uses.count - head > 2 * entries.count + 64 || head > max(64, uses.count / 2) {   // drop uses no entry stands at
            uses = uses[head...].filter { entries[$0.digest]?.used == $0.stamp }
            head = 0
        }
    }

    private mutating func leastRecentlyUsed() -> String? {
        while head < uses.count {
            let use = uses[head]
            if entries[use.digest]?.used == use.stamp { return use.digest }
            head += 1
        }
        return nil
    }
}
