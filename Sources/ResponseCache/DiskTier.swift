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

/// One file per entry in a directory of its own, written atomically (temp file + rename),
/// bounded in bytes with oldest-first (least recently used) eviction.
final class DiskTier<Value: Codable & Sendable> {
    let directory: URL
    let byteLimit: Int
    private let fm = FileManager.default
    static var suffix: String { ".entry.json" }
    static var temporaryMarker: String { ".tmp-" }

    /// Opens (creating, mode 0700) `directory`; removes temp files a crash left behind.
    /// - Throws: ``DiskTierError/unusable(_:reason:)`` when the directory cannot be created or written.
    init(directory: URL, byteLimit: Int) throws {
        self.directory = directory
        self.byteLimit = byteLimit
        do {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let probe = directory.appendingPathComponent("\(Self.temporaryMarker)probe")
            try Data("probe".utf8).write(to: probe)
            try fm.removeItem(at: probe)
        } catch {
            throw DiskTierError.unusable(directory.path, reason: "\(error.localizedDescription)")
        }
        for name in (try? fm.contentsOfDirectory(atPath: directory.path)) ?? [] where name.contains(Self.temporaryMarker) {
            try? fm.removeItem(at: directory.appendingPathComponent(name))
        }
    }

    private func file(_ digest: String) -> URL { directory.appendingPathComponent(digest + Self.suffix) }

    /// Reads an entry; a truncated or garbled file is removed and reported.
    func read(_ digest: String) -> Result<Envelope<Value>?, DiskTierError> {
        let url = file(digest)
        guard let data = fm.contents(atPath: url.path) else { return .success(nil) }
        guard let envelope = try? JSONDecoder().decode(Envelope<Value>.self, from: data), envelope.key.digest == digest else {
            try? fm.removeItem(at: url)
            return .failure(.corrupt(url.lastPathComponent))
        }
        try? fm.setAttributes([.modificationDate: Date()], ofItemAtPath: url.path)   // LRU: touched on use
        return .success(envelope)
    }

    /// Writes an entry atomically (a private temporary file, mode 0600 before any byte is in
    /// it, then a rename), then evicts the least recently used files over the byte limit.
    /// - Returns: how many files were evicted.
    func write(_ envelope: Envelope<Value>) throws -> Int {
        let data = try JSONEncoder().encode(envelope)
        let temporary = directory.appendingPathComponent("\(envelope.key.digest)\(Self.temporaryMarker)\(UUID().uuidString)")
        guard fm.createFile(atPath: temporary.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw DiskTierError.unusable(directory.path, reason: "cannot create a file")
        }
        do {
            let handle = try FileHandle(forWritingTo: temporary)
            defer { try? handle.close() }
            try handle.write(contentsOf: data)
        } catch {
            try? fm.removeItem(at: temporary)
            throw error
        }
        guard rename(temporary.path, file(envelope.key.digest).path) == 0 else {
            try? fm.removeItem(at: temporary)
            throw DiskTierError.unusable(directory.path, reason: "rename failed (errno \(errno))")
        }
        return evictOverLimit()
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
