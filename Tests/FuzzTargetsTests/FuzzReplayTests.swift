import Foundation
import FuzzTargets
import LMTestSupport
import Testing

/// Replays every committed input of every fuzz target, the seed corpora and the saved crash
/// reproducers alike, through the same entry points libFuzzer drives: a regression that makes
/// one of them crash fails the normal suite (the process dies, and the run with it).
struct FuzzReplayTests {
    static let root = Fixtures.packageRoot.appendingPathComponent("Fuzz")

    static func inputs(_ target: FuzzTarget) -> [URL] {
        ["corpus", "crashes"].flatMap { folder -> [URL] in
            let directory = root.appendingPathComponent(folder).appendingPathComponent(target.rawValue)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { directory.appendingPathComponent($0) }
        }
    }

    /// The entry points block their calling thread while async work finishes (libFuzzer calls
    /// them on its own thread); here they get a thread of their own too, never one of the
    /// concurrency pool's, which the async work needs.
    @Test(arguments: FuzzTarget.allCases)
    func replay_everyCommittedInputRuns(target: FuzzTarget) async throws {
        let inputs = try Self.inputs(target).map { try Data(contentsOf: $0) }
        #expect(!inputs.isEmpty, "no seed corpus for \(target.rawValue)")
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                for input in inputs { target.run(input) }
                done.resume()
            }.start()
        }
    }
}

/// The prefix-store seed is a file the current format accepts (a format change must come with
/// a new seed, or the fuzzer would start from inputs rejected at the version check), and a
/// restore from it maps pages, so fuzzing reaches that path.
struct PrefixStoreSeedTests {
    @Test func seed_restoresEveryTokenAndMapsPages() throws {
        let seed = FuzzReplayTests.root.appendingPathComponent("corpus/prefix-store-file/entry.kvp")
        let directory = Fixtures.temporaryFile("seed-check")   // not the target's own folder: the replay test uses it meanwhile
        defer { try? FileManager.default.removeItem(at: directory) }
        let restored = FuzzTarget.restorePrefixStoreFile(try Data(contentsOf: seed), in: directory)
        #expect(restored.tokens == FuzzTarget.storeTokens.count)
        #expect(restored.mappedBytes > 0)
        let fresh = FuzzTarget.restorePrefixStoreFile(try FuzzTarget.prefixStoreSeed(), in: directory)
        #expect(fresh.tokens == FuzzTarget.storeTokens.count)
    }
}
