import AtomicFiles
import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What one invalidation removed: the entries it matches.
enum InvalidationScope: Equatable, Sendable {
    case key(digest: String)
    case tag(String)
    case dataFingerprint(String)
    case all

    /// Whether an entry stored under `key` falls under this invalidation.
    func matches(_ key: CacheKey) -> Bool {
        switch self {
        case let .key(digest): key.digest == digest
        case let .tag(tag): key.tags.contains(tag)
        case let .dataFingerprint(fingerprint): key.dataFingerprint == fingerprint
        case .all: true
        }
    }
}

/// The invalidations made by every process sharing a disk directory, in order, so that a
/// generation can tell at its end whether one of them concerned its key while it ran (its input
/// may be stale then, and it is not stored) or not (it is).
///
/// The file, `.invalidations`, is a header line naming its epoch (32 random hex digits) followed by
/// entries of fixed length, `<kind> <64 hex digits>\n`: `k` and the key's digest, `t` or `d` and a
/// SHA-256 of the tag or data fingerprint (the file holds no tag text), `a` and zeros for
/// everything. Entries are appended under an exclusive `flock` of `.invalidations.lock`, read
/// under a shared one. At ``capacity`` entries the next one starts a new file (new epoch, written
/// atomically); a generation that began under another epoch, or finds the file unreadable, torn or
/// shorter than when it began, cannot tell what happened and counts as invalidated: the rule errs
/// towards not storing.
final class InvalidationJournal {
    /// Where a generation began: the journal's epoch and length then.
    struct Mark: Equatable, Sendable {
        let epoch: String
        let length: Int
    }

    /// Entries a journal holds before the next one starts a new file.
    static let capacity = 1_024
    static let entryLength = 67
    private static let prefix = "kvsession-invalidations 1 "
    private static var headerLength: Int { prefix.utf8.count + 33 }
    private static let all = String(repeating: "0", count: 64)

    private let file: URL
    private let marker: String
    private let lockFile: URL
    /// The lock file, open; replaced when the file at ``lockFile`` is no longer the one it holds.
    private var lockDescriptor: Int32

    /// Opens the journal of `directory` (creating the lock file, and a journal when there is none or
    /// it is not one).
    /// - Throws: ``DiskTierError/unusable(_:reason:)`` when the lock file cannot be opened.
    init(directory: URL, marker: String) throws {
        file = directory.appendingPathComponent(".invalidations")
        self.marker = marker
        lockFile = directory.appendingPathComponent(".invalidations.lock")
        lockDescriptor = open(lockFile.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lockDescriptor >= 0 else {
            throw DiskTierError.unusable(directory.path, reason: "cannot open \(lockFile.lastPathComponent): errno \(errno)")
        }
        locked(exclusive: true) {
            if case .none = read() { start(with: nil) }
        }
        // Versions before the journal replaced a marker file on every invalidation; nothing reads
        // it now. (One of them still running on the directory then finds its marker changed, and
        // does not store the generation it was checking: the safe side.)
        try? FileManager.default.removeItem(at: directory.appendingPathComponent(".invalidated"))
    }

    deinit { close(lockDescriptor) }

    /// Where the journal stands now (`nil`: it cannot be read, so nothing can be ruled out later).
    func mark() -> Mark? {
        locked(exclusive: false) { read().map { Mark(epoch: $0.epoch, length: $0.length) } }
    }

    /// Appends `scope`, starting a new file when the journal is full or unreadable.
    /// - Returns: where the journal stood just before and just after (`before` is `nil` when it did
    ///   not read), so that a reader that had seen everything before can skip its own entry; `nil`
    ///   when it could not be recorded (other processes then do not learn of it).
    @discardableResult
    func record(_ scope: InvalidationScope) -> (before: Mark?, after: Mark)? {
        let entry = Self.entry(scope)
        return locked(exclusive: true) {
            let journal = read(), before = journal.map { Mark(epoch: $0.epoch, length: $0.length) }
            guard let journal, journal.entries.count < Self.capacity else {
                return start(with: entry).map { (before, $0) }
            }
            let descriptor = open(file.path, O_WRONLY | O_APPEND | O_CLOEXEC)
            guard descriptor >= 0 else { return nil }
            defer { close(descriptor) }
            let bytes = Array(entry.utf8)
            guard Foundation.write(descriptor, bytes, bytes.count) == bytes.count else { return nil }
            return (before, Mark(epoch: journal.epoch, length: journal.length + bytes.count))
        }
    }

    /// Whether an invalidation recorded since `mark` matches `key`, or the journal cannot say
    /// (no mark, another epoch, a file that shrank or does not read).
    func invalidates(_ key: CacheKey, since mark: Mark?) -> Bool {
        guard let mark, let changes = changes(since: mark) else { return true }
        return Self.any(of: changes.entries, matches: key)
    }

    /// The entries recorded since `mark` and where the journal stands now; `nil` when it cannot say
    /// (another epoch, a file that shrank or does not read). When the file's length is the mark's,
    /// only its header is read, without the lock (the header changes only by a rename).
    func changes(since mark: Mark) -> (entries: [String], now: Mark)? {
        if let handle = FileHandle(forReadingAtPath: file.path) {
            defer { try? handle.close() }
            if (try? handle.seekToEnd()) == UInt64(mark.length), (try? handle.seek(toOffset: 0)) != nil,
               let header = try? handle.read(upToCount: Self.headerLength), Self.epoch(in: header) == mark.epoch {
                return ([], mark)
            }
        }
        return locked(exclusive: false) {
            guard let journal = read(), journal.epoch == mark.epoch, journal.length >= mark.length else { return nil }
            let since = (mark.length - Self.headerLength) / Self.entryLength
            return (Array(journal.entries.dropFirst(since)), Mark(epoch: journal.epoch, length: journal.length))
        }
    }

    /// Whether any of the journal entries `entries` (from ``changes(since:)``) invalidated what
    /// `key` stores.
    static func any(of entries: [String], matches key: CacheKey) -> Bool {
        !entries.isEmpty && !Self.entries(matching: key).isDisjoint(with: entries)
    }

    // MARK: The file

    /// The journal's epoch, length and entries; `nil` when it is missing, larger than a full
    /// journal, or not made of a valid header and whole valid entries.
    private func read() -> (epoch: String, length: Int, entries: [String])? {
        let limit = Self.headerLength + Self.capacity * Self.entryLength
        guard let handle = FileHandle(forReadingAtPath: file.path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: limit + 1), data.count <= limit, data.count >= Self.headerLength,
              (data.count - Self.headerLength) % Self.entryLength == 0 else { return nil }
        let bytes = [UInt8](data)
        guard let epoch = Self.epoch(in: data) else { return nil }
        var entries: [String] = []
        for start in stride(from: Self.headerLength, to: bytes.count, by: Self.entryLength) {
            let entry = bytes[start ..< start + Self.entryLength]
            guard Self.isValid(entry) else { return nil }
            entries.append(String(decoding: entry, as: UTF8.self))
        }
        return (epoch, bytes.count, entries)
    }

    /// The epoch a journal's first bytes name, if they are a valid header.
    private static func epoch(in data: Data) -> String? {
        let bytes = [UInt8](data.prefix(headerLength)), prefix = Array(Self.prefix.utf8)
        guard bytes.count == headerLength, bytes.starts(with: prefix), bytes[headerLength - 1] == UInt8(ascii: "\n") else { return nil }
        let epoch = bytes[prefix.count ..< headerLength - 1]
        return epoch.allSatisfy(isHexDigit) ? String(decoding: epoch, as: UTF8.self) : nil
    }

    /// Replaces the journal with a new epoch holding `entry` (or nothing), atomically.
    /// - Returns: where the new journal stands (`nil`: it could not be written).
    @discardableResult
    private func start(with entry: String?) -> Mark? {
        var generator = SystemRandomNumberGenerator()
        let epoch = (0 ..< 16).map { _ in String(format: "%02x", UInt8.random(in: 0 ... 255, using: &generator)) }.joined()
        let text = Self.prefix + epoch + "\n" + (entry ?? "")
        guard (try? AtomicFile.write(Data(text.utf8), to: file, marker: marker, durable: false)) != nil else { return nil }
        return Mark(epoch: epoch, length: text.utf8.count)
    }

    /// Runs `body` holding the lock file's `flock`. A lock taken on a file that was removed or
    /// replaced since it was opened (by a person, or a cleanup of the directory) would exclude no
    /// process that opens the path now, so the file is opened again, created if need be, and locked
    /// anew; if it cannot be opened, the old descriptor's lock is what there is.
    private func locked<T>(exclusive: Bool, _ body: () -> T) -> T {
        while true {
            while flock(lockDescriptor, exclusive ? LOCK_EX : LOCK_SH) != 0, errno == EINTR {}
            var held = stat(), named = stat()
            if fstat(lockDescriptor, &held) != 0 || stat(lockFile.path, &named) == 0 && held.st_dev == named.st_dev
                && held.st_ino == named.st_ino {
                break
            }
            let reopened = open(lockFile.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            if reopened < 0 { break }
            flock(lockDescriptor, LOCK_UN)
            close(lockDescriptor)
            lockDescriptor = reopened
        }
        defer { flock(lockDescriptor, LOCK_UN) }
        return body()
    }

    // MARK: Entries

    private static func entry(_ scope: InvalidationScope) -> String {
        switch scope {
        case let .key(digest): "k \(digest)\n"
        case let .tag(tag): "t \(hash("tag", tag))\n"
        case let .dataFingerprint(fingerprint): "d \(hash("data", fingerprint))\n"
        case .all: "a \(all)\n"
        }
    }

    /// The entries that would match `key`.
    private static func entries(matching key: CacheKey) -> Set<String> {
        var wanted: Set<String> = [entry(.all), entry(.key(digest: key.digest))]
        for tag in key.tags { wanted.insert(entry(.tag(tag))) }
        if let fingerprint = key.dataFingerprint { wanted.insert(entry(.dataFingerprint(fingerprint))) }
        return wanted
    }

    /// Whether `entry` is `<k|t|d|a> <64 lowercase hex digits>\n`.
    private static func isValid(_ entry: ArraySlice<UInt8>) -> Bool {
        let bytes = Array(entry)
        return bytes.count == entryLength && "ktda".utf8.contains(bytes[0]) && bytes[1] == UInt8(ascii: " ")
            && bytes[66] == UInt8(ascii: "\n") && bytes[2 ..< 66].allSatisfy(isHexDigit)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool { (48 ... 57).contains(byte) || (97 ... 102).contains(byte) }

    private static func hash(_ kind: String, _ text: String) -> String {
        var hasher = SHA256()
        hasher.update(data: Array("\(kind):".utf8) + Array(text.utf8))
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
