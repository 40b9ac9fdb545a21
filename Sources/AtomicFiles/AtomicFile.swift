import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files written whole or not at all into a directory that other processes may share (an app
/// and its extensions in one app-group container, say): the bytes go to a temporary file beside
/// the destination (mode 0600 before any byte is in it), are flushed to the device if asked, and
/// the file is renamed over the destination, so a reader opens either the old file or the new one, whole.
///
/// A temporary file's name carries its writer's process id: `<stem><marker><pid>-<uuid>`. A
/// writer killed mid-write leaves its temporary file behind; whoever opens the directory next
/// removes the ones whose writer is gone (``removeAbandonedTemporaryFiles(in:marker:)``) and never
/// one that a live process (this one or another) is still writing.
package enum AtomicFile {
    /// What a written file is on disk: its inode number (a rename over it makes another) and size.
    package struct Written: Sendable, Equatable {
        /// The file's inode number.
        package var inode: UInt64
        /// Its size in bytes.
        package var bytes: Int
    }

    /// Writes `data` to `destination` atomically by way of `destination`'s directory's temporary
    /// file `<stem><marker><pid>-<uuid>`, flushed to the device (`fsync`) before the rename when
    /// `durable` (else a power loss may leave the destination empty or torn, which a reader that
    /// validates files treats as a miss).
    /// - Returns: the new file's inode and size.
    /// - Throws: ``AtomicFileError`` naming the step that failed; the temporary file is then removed
    ///   and `destination` is as it was.
    package static func write(_ data: Data, to destination: URL, stem: String = "", marker: String,
                              durable: Bool) throws(AtomicFileError) -> Written {
        let directory = destination.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(temporaryName(stem: stem, marker: marker))
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .failed(step: "create a temporary file", path: directory.path, errno: errno) }
        var status = stat()
        do throws(AtomicFileError) {
            defer { close(descriptor) }
            let failure: Int32? = data.withUnsafeBytes { bytes in
                var done = 0
                while done < bytes.count {
                    let n = Foundation.write(descriptor, bytes.baseAddress! + done, bytes.count - done)
                    if n < 0, errno == EINTR { continue }
                    guard n > 0 else { return n < 0 ? errno : EIO }
                    done += n
                }
                return nil
            }
            if let failure { throw .failed(step: "write", path: temporary.path, errno: failure) }
            guard !durable || fsync(descriptor) == 0 else { throw .failed(step: "flush", path: temporary.path, errno: errno) }
            guard fstat(descriptor, &status) == 0 else { throw .failed(step: "stat", path: temporary.path, errno: errno) }
            guard rename(temporary.path, destination.path) == 0 else {
                throw .failed(step: "rename into place", path: destination.path, errno: errno)
            }
        } catch {
            unlink(temporary.path)
            throw error
        }
        return Written(inode: UInt64(status.st_ino), bytes: Int(status.st_size))
    }

    /// A fresh temporary file name for this process: `<stem><marker><pid>-<uuid>`.
    package static func temporaryName(stem: String = "", marker: String) -> String {
        "\(stem)\(marker)\(getpid())-\(UUID().uuidString)"
    }

    /// Whether `name` is a temporary file name (it holds `marker`).
    package static func isTemporary(_ name: String, marker: String) -> Bool { name.contains(marker) }

    /// Whether the temporary file `name` was left by a writer that is gone: the process id after
    /// `marker` names no running process (or is missing: a name from before ids were recorded).
    /// A process this one may not signal still runs; this process's own files are in use.
    package static func isAbandoned(_ name: String, marker: String) -> Bool {
        guard let range = name.range(of: marker) else { return false }
        guard let pid = Int32(name[range.upperBound...].prefix { $0 != "-" }), pid > 0 else { return true }
        if pid == getpid() { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }

    /// Removes the temporary files in `directory` whose writer is gone (``isAbandoned(_:marker:)``).
    /// - Returns: how many were removed.
    @discardableResult
    package static func removeAbandonedTemporaryFiles(in directory: URL, marker: String) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { isAbandoned($0, marker: marker) && unlink(directory.appendingPathComponent($0).path) == 0 }.count
    }
}
