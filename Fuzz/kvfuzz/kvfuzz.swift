import CFuzzShim
import Foundation
import FuzzTargets

// `kvfuzz`: libFuzzer over one of the package's parsers, chosen by KVFUZZ_TARGET. Build and run it
// with `Scripts/fuzz`, which builds it with `-sanitize=fuzzer,address` (one list: a second
// `-sanitize=` flag replaces the first, and the coverage counters with it). Depending on how SwiftPM links the
// executable, the process starts in libFuzzer's own `main` (which calls the two `LLVMFuzzer`
// functions below) or in `kvfuzz_main` (SwiftPM's name for this module's entry point), which
// hands the same callback to libFuzzer's driver; a build without libFuzzer says how to get one.

/// The target named by KVFUZZ_TARGET, read once.
private let selected = ProcessInfo.processInfo.environment["KVFUZZ_TARGET"].flatMap(FuzzTarget.init(rawValue:))

/// Stops with a usage line unless KVFUZZ_TARGET names a target.
private func requireTarget() -> FuzzTarget {
    guard let selected else {
        complain("kvfuzz: set KVFUZZ_TARGET to one of: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")) (Scripts/fuzz does)")
        exit(2)
    }
    return selected
}

@_cdecl("LLVMFuzzerInitialize")
func fuzzerInitialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    _ = requireTarget()
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    requireTarget().run(data.map { Data(bytes: $0, count: size) } ?? Data())
    return 0
}

@_cdecl("kvfuzz_main")
func kvfuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    let target = requireTarget()
    var count = argc
    var arguments = argv
    let status = kv_run_fuzzer(&count, &arguments) { data, size in fuzzerTestOneInput(data, size) }
    if status == -1 {
        complain("kvfuzz: this build has no libFuzzer; run Scripts/fuzz \(target.rawValue)")
        return 2
    }
    return status
}
