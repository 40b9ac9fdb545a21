import AtomicFiles
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What the disk tier stores per entry, one JSON file each.
struct Envelope<Value: Codable & Sendable>: Codable, Sendable {
    var key: CacheKey
    var created: Date
    var value: Value
}

/// Errors of the disk tier (reported in metrics; the cache keeps working from memory).
enum DiskTierError: Error, CustomStringConvertible {
    case unusable(String, reason: String)
    case corrupt(String)

    var description: String {
        switch self {
        case let .unusable(path, reason): "disk tier at \(path) is unusable: \(reason)"
        case let .corrupt(file): "corrupt cache entry \(file) was removed"
        }
    }
}

/// One file per entry in a directory of its own, written atomically (``AtomicFile``: temp file,
/// then renamed), bounded in bytes with oldest-first (least recently used) eviction.
/// Keeps no index: every count and eviction lists the directory, so processes sharing it (an
/// app and its extensions) see each other's entries and hold the byte limit together.
final class DiskTier<Value: Codable & Sendable> {
    let directory: URL
    let byteLimit: Int
    /// What every process sharing the directory invalidated, in order.
    let journal: InvalidationJournal
    private let fm = FileManager.default
    static var suffix: String { ".entry.json" }
    static var temporaryMarker: String { ".tmp-" }

    /// Opens (creating, mode 0700) `directory`; removes temp files whose writer is gone (killed
    /// mid-write), never one another process is writing.
    /// - Throws: ``DiskTierError/unusable(_:reason:)`` when the directory cannot be created or written.
    init(directory: URL, byteLimit: Int) throws {
        self.directory = directory
        self.byteLimit = byteLimit
        do {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let probe = directory.appendingPathComponent(AtomicFile.temporaryName(marker: Self.temporaryMarker))
            try Data("probe".utf8).write(to: probe)
            try fm.removeItem(at: probe)
        } catch {
            throw DiskTierError.unusable(directory.path, reason: "\(error.localizedDescription)")
        }
        journal = try InvalidationJournal(directory: directory, marker: Self.temporaryMarker)
        AtomicFile.removeAbandonedTemporaryFiles(in: directory, marker: Self.temporaryMarker)
    }

    private func file(_ digest: String) -> URL { directory.appendingPathComponent(digest + Self.suffix) }

    /// Reads an entry and the inode of the file it came from; a truncated or garbled file is
    /// removed and reported.
    func read(_ digest: String) -> Result<(envelope: Envelope<Value>, inode: UInt64)?, DiskTierError> {
        let url = file(digest)
        guard let handle = FileHandle(forReadingAtPath: url.path) else { return .success(nil) }
        defer { try? handle.close() }
        var status = stat()
        guard fstat(handle.fileDescriptor, &status) == 0, let data = try? handle.readToEnd() else { return .success(nil) }
        guard let envelope = try? JSONDecoder().decode(Envelope<Value>.self, from: data), envelope.key.digest == digest else {
            try? fm.removeItem(at: url)
            return .failure(.corrupt(url.lastPathComponent))
        }
        touch(digest)   // LRU: touched on use
        return .success((envelope, UInt64(status.st_ino)))
    }

    /// The inode of `digest`'s file (`nil`: there is none). A file another process wrote since
    /// (replaced by rename) has another; one it invalidated or evicted is gone.
    func inode(_ digest: String) -> UInt64? {
        var status = stat()
        return stat(file(digest).path, &status) == 0 ? UInt64(status.st_ino) : nil
    }

    /// Marks `digest`'s file as used now, for the least-recently-used eviction.
    func touch(_ digest: String) { utimes(file(digest).path, nil) }

    /// Writes an entry atomically (``AtomicFile/write(_:to:stem:marker:durable:)``), then evicts the least
    /// recently used files over the byte limit.
    /// - Returns: how many files were evicted, and the new file's inode (`nil` when it was evicted
    ///   at once: larger than the limit allows).
    func write(_ envelope: Envelope<Value>) throws -> (evicted: Int, inode: UInt64?) {
        let data = try JSONEncoder().encode(envelope)
        let written: AtomicFile.Written
        do {
            written = try AtomicFile.write(data, to: file(envelope.key.digest), stem: envelope.key.digest, marker: Self.temporaryMarker,
                                           durable: false)   // a cache: an entry torn by a power loss fails to decode and is removed
        } catch {
            throw DiskTierError.unusable(directory.path, reason: error.description)
        }
        let evicted = evictOverLimit()
        return (evicted, inode(envelope.key.digest) == written.inode ? written.inode : nil)
    }

    func remove(_ digest: String) { try? fm.removeItem(at: file(digest)) }

    /// Every readable entry (corrupt files are skipped; `read` removes them when asked for).
    func envelopes() -> [Envelope<Value>] {
        entryFiles().compactMap { name in
            guard let data = fm.contents(atPath: directory.appendingPathComponent(name).path) else { return nil }
            return try? JSONDecoder().decode(Envelope<Value>.self, from: data)
        }
    }

    /// Total bytes of entry files.
    var byteCount: Int { entryFiles().map { size(of: $0) }.reduce(0, +) }

    private func entryFiles() -> [String] {
        ((try? fm.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(Self.suffix) }
    }

    private func size(of name: String) -> Int {
        (try? fm.attributesOfItem(atPath: directory.appendingPathComponent(name).path)[.size] as? Int) ?? 0
    }

    private func modified(_ name: String) -> Date {
        (try? fm.attributesOfItem(atPath: directory.appendingPathComponent(name).path)[.modificationDate] as? Date) ?? .distantPast
    }

    private func evictOverLimit() -> Int {
        var files = entryFiles().map { (name: $0, size: size(of: $0), used: modified($0)) }.sorted { $0.used < $1.used }
        var total = files.map(\.size).reduce(0, +), evicted = 0
        while total > byteLimit, !files.isEmpty {
            let oldest = files.removeFirst()
            try? fm.removeItem(at: directory.appendingPathComponent(oldest.name))
            total -= oldest.size
            evicted += 1
        }
        return evicted
    }
}
