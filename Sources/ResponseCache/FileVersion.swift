import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What tells one version of a disk-tier file from another: its inode, its size and its
/// status-change time. A rename over the name gives another inode, a rewrite in place another
/// size or time, and a file that got a removed file's inode number back another time. Marking a
/// file as used (the tier's LRU) moves the time too, so the same entry touched by another process
/// is another version here; ``DiskTier/holds(_:id:created:asOf:)`` tells those apart by the
/// entry's header.
struct FileVersion: Equatable, Sendable {
    var inode: UInt64
    var bytes: Int
    /// Status-change time (ns): moves on every write, rename and time-stamp change.
    var changed: Int

    init(_ status: stat) {
        inode = UInt64(status.st_ino)
        bytes = Int(status.st_size)
        changed = Self.nanoseconds(Self.statusChangeTime(status))
    }

    private static func statusChangeTime(_ status: stat) -> timespec {
        #if canImport(Darwin)
        status.st_ctimespec
        #else
        status.st_ctim
        #endif
    }

    static func nanoseconds(_ time: timespec) -> Int { Int(time.tv_sec) * 1_000_000_000 + Int(time.tv_nsec) }
}
