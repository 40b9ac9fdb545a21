import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why an atomic write failed: the step, the path and the system's error number.
package enum AtomicFileError: Error, CustomStringConvertible {
    /// `step` failed on `path` with `errno`.
    case failed(step: String, path: String, errno: Int32)

    package var description: String {
        switch self {
        case let .failed(step, path, code): "cannot \(step) at \(path): \(String(cString: strerror(code))) (errno \(code))"
        }
    }
}
