import Foundation

/// Writes a line to standard error. (A file of its own also keeps `kvfuzz.swift` from being
/// compiled as a script, whose implicit entry point would clash with `kvfuzz_main`.)
func complain(_ line: String) { FileHandle.standardError.write(Data((line + "\n").utf8)) }
