import Foundation

/// The process's resident memory, as the kernel counts it.
enum ResidentMemory {
    /// Resident MiB now, from `/proc/self/statm` (Linux); `nil` where that file does not exist.
    static func mebibytes() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Double(fields[1]) else { return nil }
        return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
    }
}
