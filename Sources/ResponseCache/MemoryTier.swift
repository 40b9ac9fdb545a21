import Foundation

/// An in-memory LRU bounded by entry count and bytes.
struct MemoryTier<Value: Sendable> {
    struct Entry: Sendable {
        var key: CacheKey
        var value: Value
        var created: Date
        var bytes: Int
        /// The inode of the disk tier's file this value is also in, and when this process last
        /// marked that file as used (`nil`: not on disk).
        var file: (inode: UInt64, touched: Date)? = nil
    }

    let entryLimit: Int
    let byteLimit: Int
    private var entries: [String: Entry] = [:]
    private var order: [String] = []   // least recently used first
    private(set) var bytes = 0

    init(entryLimit: Int, byteLimit: Int) {
        self.entryLimit = entryLimit
        self.byteLimit = byteLimit
    }

    mutating func get(_ digest: String) -> Entry? {
        guard let entry = entries[digest] else { return nil }
        touch(digest)
        return entry
    }

    /// Inserts (or replaces) an entry; returns how many entries were evicted.
    mutating func put(_ entry: Entry) -> Int {
        remove(entry.key.digest)
        entries[entry.key.digest] = entry
        order.append(entry.key.digest)
        bytes += entry.bytes
        var evicted = 0
        while entries.count > entryLimit || (bytes > byteLimit && entries.count > 1), let oldest = order.first {
            remove(oldest)
            evicted += 1
        }
        return evicted
    }

    /// Records which disk file (inode) holds `digest`'s value, and when it was last marked as used.
    mutating func setFile(_ digest: String, _ file: (inode: UInt64, touched: Date)?) {
        entries[digest]?.file = file
    }

    mutating func remove(_ digest: String) {
        guard let entry = entries.removeValue(forKey: digest) else { return }
        bytes -= entry.bytes
        order.removeAll { $0 == digest }
    }

    mutating func removeAll(where predicate: (Entry) -> Bool) {
        for (digest, entry) in entries where predicate(entry) { remove(digest) }
    }

    var count: Int { entries.count }

    private mutating func touch(_ digest: String) {
        order.removeAll { $0 == digest }
        order.append(digest)
    }
}
