import AtomicFiles
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the disk tier stores per entry, one JSON file each.
struct Envelope<Value: Codable & Sendable>: Codable, Sendable {
    var key: CacheKey
    var created: Date
    var value: Value
    /// Made afresh for each stored generation, so that two generations of one key stay apart
    /// even when their files got the same inode number and the clock read the same time for
    /// both (`nil` in files written before it existed).
    var id: UUID? = nil

    /// An envelope as its file holds it (the memory tier counts the same bytes), with the key and
    /// creation time the disk tier indexes.
    struct Encoded {
        let key: CacheKey
        let created: Date
        let id: UUID?
        let data: Data
        var digest: String { key.digest }
    }

    /// The file's bytes.
    /// - Throws: the encoder's error, for a value JSON cannot hold (a non-finite number, or a
    ///   value whose `encode(to:)` throws).
    func encoded() throws -> Encoded { Encoded(key: key, created: created, id: id, data: try JSONEncoder().encode(self)) }
}

/// An envelope's key, creation time and identifier, decoded without its value.
private struct EnvelopeHeader: Decodable {
    var key: CacheKey
    var created: Date
    var id: UUID?
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
/// The directory is the truth: the byte count comes from listing it, so processes sharing it (an
/// app and its extensions) see each other's entries and hold the byte limit together. Between
/// listings it is carried forward by this tier's own writes and removals, and the directory is
/// listed again when its modification time shows a change this tier did not make, or when the
/// count passes the limit; eviction then goes down to ``lowWater``, so a full cache lists its
/// directory once per sixteenth of the limit written, not on every write.
/// What it keeps besides is a cache of each file's key and creation time (``removeAll(where:)``
/// reads a file's header only when it has not seen that file: another inode, size or
/// status-change time), so invalidating a tag costs a listing, not a read of every entry.
final class DiskTier<Value: Codable & Sendable> {
    let directory: URL
    let byteLimit: Int
    /// What eviction leaves at most: 15/16 of ``byteLimit``.
    var lowWater: Int { byteLimit - byteLimit / 16 }
    /// What every process sharing the directory invalidated, in order.
    let journal: InvalidationJournal
    private let fm = FileManager.default
    static var suffix: String { ".entry.json" }
    static var temporaryMarker: String { ".tmp-" }
    /// Bytes of entry files: what the last listing found, plus this tier's writes and removals since.
    private var tally = 0
    /// The directory's modification time (ns) after the last listing or this tier's last change
    /// to it; another one means someone else changed it since (`nil`: list before trusting `tally`).
    private var lastChange: Int?
    /// Directory listings so far (tests check that writes under the limit list nothing).
    private(set) var listings = 0
    /// Entry files read for their key and creation time so far (tests check that files this tier
    /// wrote, read or read before are not read again).
    private(set) var headerReads = 0

    /// A file's key and creation time, and which file they came from: the same name with another
    /// inode (replaced by a rename), size or status-change time (rewritten in place, or touched)
    /// is read again. The status-change time also tells a file apart from an earlier one whose
    /// inode number it got back.
    private struct KnownHeader {
        var file: FileVersion
        var key: CacheKey
        var created: Date
        var id: UUID?
    }
    /// Headers of entry files, by file name: from this tier's writes and reads, and from the files
    /// ``removeAll(where:)`` read. A few hundred bytes an entry (its key's digest, tags and
    /// fingerprint).
    private var headers: [String: KnownHeader] = [:]
    /// How many files' headers the tier holds (tests check that none outlives its file).
    var knownHeaderCount: Int { headers.count }

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
    private func name(_ digest: String) -> String { digest + Self.suffix }

    /// Reads an entry, the version of the file it came from (after marking it as used) and its
    /// size; a truncated or garbled file is removed and reported.
    func read(_ digest: String) -> Result<(envelope: Envelope<Value>, version: FileVersion, bytes: Int)?, DiskTierError> {
        let url = file(digest)
        guard let handle = FileHandle(forReadingAtPath: url.path) else { return .success(nil) }
        defer { try? handle.close() }
        var status = stat()
        guard fstat(handle.fileDescriptor, &status) == 0 else { return .success(nil) }
        let data: Data
        do { data = try handle.readToEnd() ?? Data() } catch { return .success(nil) }   // empty (torn) is corrupt; a read error a miss
        guard let envelope = try? JSONDecoder().decode(Envelope<Value>.self, from: data), envelope.key.digest == digest else {
            remove(digest)
            return .failure(.corrupt(url.lastPathComponent))
        }
        // LRU: the file read is touched on use (not whatever the name may stand for by now).
        if futimens(handle.fileDescriptor, nil) == 0 { _ = fstat(handle.fileDescriptor, &status) }
        headers[url.lastPathComponent] = KnownHeader(file: FileVersion(status), key: envelope.key, created: envelope.created, id: envelope.id)
        return .success((envelope, FileVersion(status), data.count))
    }

    /// Whether `digest`'s file still holds the entry this tier wrote or read as `version`, with
    /// identifier `id` and created at `created`; if so, the file's version now (`nil`: the file is
    /// gone, or holds another entry). The same version holds it. A file with the same inode but
    /// another version (another process marked it as used, or the inode number came back on a new
    /// file after an eviction, expiry or sweep) holds it when its header carries the same key,
    /// identifier and creation time, read once per version. A file another process wrote since
    /// by rename has another inode and does not.
    func holds(_ digest: String, id: UUID?, created: Date, asOf version: FileVersion) -> FileVersion? {
        guard let now = status(digest), now.inode == version.inode else { return nil }
        if now == version { return now }
        guard let header = header(of: (name(digest), now, 0)), header.key.digest == digest, header.id == id,
              header.created == created else { return nil }
        return now
    }

    /// Marks `digest`'s file as used now, for the least-recently-used eviction.
    /// - Returns: the file's version after it, when the file touched was the version `expected`
    ///   (`nil`: another one, or none, or no version was expected).
    @discardableResult
    func touch(_ digest: String, expected: FileVersion? = nil) -> FileVersion? {
        guard let before = status(digest), utimes(file(digest).path, nil) == 0, let now = status(digest),
              now.inode == before.inode else { return nil }   // a rename in between shows another inode
        if var known = headers[name(digest)], known.file == before {
            known.file = now   // the file it knew, touched
            headers[name(digest)] = known
        }
        return before == expected ? now : nil
    }

    /// Writes an entry atomically (``AtomicFile/write(_:to:stem:marker:durable:)``); when the
    /// byte count then passes the limit, evicts the least recently used files of the directory
    /// down to ``lowWater``. An entry larger than the limit is not written (and an older file for
    /// its key is removed): it counts as evicted at once, and the other entries stay.
    /// - Returns: how many files were evicted, and the new file's version (`nil` when it was not
    ///   kept, or another process replaced it at once).
    func write(_ entry: Envelope<Value>.Encoded) throws -> (evicted: Int, version: FileVersion?) {
        let (data, digest) = (entry.data, entry.digest)
        guard data.count <= byteLimit else {
            remove(digest)
            return (1, nil)
        }
        let unchanged = isUnchanged(), replaced = size(of: digest) ?? 0
        let written: AtomicFile.Written
        do {
            written = try AtomicFile.write(data, to: file(digest), stem: digest, marker: Self.temporaryMarker,
                                           durable: false)   // a cache: an entry torn by a power loss fails to decode and is removed
        } catch {
            throw DiskTierError.unusable(directory.path, reason: error.description)
        }
        tally += written.bytes - replaced
        lastChange = unchanged ? modified() : nil
        // Known unless another process replaced it since; eviction forgets what it removes.
        headers[name(digest)] = status(digest).flatMap {
            $0.inode == written.inode ? KnownHeader(file: $0, key: entry.key, created: entry.created, id: entry.id) : nil
        }
        let evicted = lastChange == nil || tally > byteLimit ? evictOverLimit(sparing: name(digest)) : 0
        return (evicted, headers[name(digest)]?.file)
    }

    /// Removes `digest`'s file, if there is one.
    func remove(_ digest: String) {
        let unchanged = isUnchanged()
        headers[name(digest)] = nil
        guard let bytes = size(of: digest), unlink(file(digest).path) == 0 else { return }
        tally -= bytes
        lastChange = unchanged ? modified() : nil
    }

    /// Removes every entry file whose key and creation time `matches` accepts, or every entry
    /// file when `matches` is `nil`. A file's key and creation time come from what this tier
    /// knows of that very file, else from its header (corrupt files are left for `read` to
    /// remove when asked for).
    /// - Returns: how many files were removed.
    func removeAll(where matches: ((_ key: CacheKey, _ created: Date) -> Bool)?) -> Int {
        var removed = 0
        for entry in list() {
            if let matches {
                guard let header = header(of: entry), matches(header.key, header.created) else { continue }
            }
            guard unlink(directory.appendingPathComponent(entry.name).path) == 0 else { continue }
            headers[entry.name] = nil
            tally -= entry.file.bytes
            removed += 1
        }
        lastChange = nil   // list again before the count is trusted: others may have written meanwhile
        return removed
    }

    /// The key and creation time of a listed file: known, or read from its header.
    private func header(of entry: Listed) -> KnownHeader? {
        if let known = headers[entry.name], known.file == entry.file { return known }
        headerReads += 1
        guard let data = fm.contents(atPath: directory.appendingPathComponent(entry.name).path),
              let header = try? JSONDecoder().decode(EnvelopeHeader.self, from: data) else { return nil }
        // Kept under the listing's status: a file replaced after the listing has another, and
        // is read again next time.
        let known = KnownHeader(file: entry.file, key: header.key, created: header.created, id: header.id)
        headers[entry.name] = known
        return known
    }

    /// Total bytes of entry files (listed again only when the directory changed other than by this tier).
    var byteCount: Int {
        if !isUnchanged() { _ = list() }
        return tally
    }

    /// An entry file as listed: its name, which version of it, and its last use (modification time, ns).
    private typealias Listed = (name: String, file: FileVersion, used: Int)

    /// The directory's entry files, one `fstatat` each; sets the byte count from them.
    private func list() -> [Listed] {
        listings += 1
        let before = modified()
        var listed: [Listed] = []
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if descriptor >= 0 {
            defer { close(descriptor) }
            for name in (try? fm.contentsOfDirectory(atPath: directory.path)) ?? [] where name.hasSuffix(Self.suffix) {
                var status = stat()
                guard fstatat(descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
                listed.append((name, FileVersion(status), FileVersion.nanoseconds(Self.modificationTime(status))))
            }
        }
        tally = listed.reduce(0) { $0 + $1.file.bytes }
        let names = Set(listed.map(\.name))
        headers = headers.filter { names.contains($0.key) }   // forget files others removed
        lastChange = before
        return listed
    }

    /// Lists the directory and, over the limit, removes the least recently used files until the
    /// count is at most ``lowWater``, never `spared`: the file just written, whose time stamp may
    /// tie with or, on a coarse file-system clock, even precede those of files used before it.
    /// (An entry evicted as it was written would live on in its cache's memory alone, out of
    /// reach of what other processes write.) With only it left the count is within the limit.
    private func evictOverLimit(sparing spared: String) -> Int {
        let listed = list()
        guard tally > byteLimit else { return 0 }
        var evicted = 0
        for oldest in listed.sorted(by: { $0.used < $1.used }) where oldest.name != spared {
            if tally <= lowWater { break }
            let unchanged = isUnchanged()
            guard unlink(directory.appendingPathComponent(oldest.name).path) == 0 else { continue }
            headers[oldest.name] = nil
            tally -= oldest.file.bytes
            lastChange = unchanged ? modified() : nil
            evicted += 1
        }
        return evicted
    }

    /// The size of `digest`'s file (`nil`: there is none).
    private func size(of digest: String) -> Int? { status(digest)?.bytes }

    /// Which version of `digest`'s file is there (`nil`: none).
    private func status(_ digest: String) -> FileVersion? {
        var status = stat()
        return stat(file(digest).path, &status) == 0 ? FileVersion(status) : nil
    }

    /// Whether the directory is as this tier last saw it.
    private func isUnchanged() -> Bool { lastChange != nil && modified() == lastChange }

    /// The directory's modification time in nanoseconds (`nil`: it cannot be read).
    private func modified() -> Int? {
        var status = stat()
        return stat(directory.path, &status) == 0 ? FileVersion.nanoseconds(Self.modificationTime(status)) : nil
    }

    private static func modificationTime(_ status: stat) -> timespec {
        #if canImport(Darwin)
        status.st_mtimespec
        #else
        status.st_mtim
        #endif
    }
}
