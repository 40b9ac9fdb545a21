import Foundation
import LMRuntime
import LMTestSupport
@testable import ResponseCache
import Testing

/// Files survive a process killed at any moment: a child process (this test binary, re-launched
/// to run only ``writerLoop()``) writes entries in a loop and is killed with SIGKILL at random
/// times; after each kill the directory opens, every entry either reads back whole or is
/// reported and removed, no temporary file survives the open, and no entry that was complete
/// before the kill is lost.
struct CrashSafetyTests {
    static let roleVariable = "KVSESSION_CRASH_WRITER", directoryVariable = "KVSESSION_CRASH_DIR"
    static let environment = ProcessInfo.processInfo.environment

    /// The tiny model and the token sequence of prefix-store entry `i` (the writer and the
    /// checker derive the same ones).
    static let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(contextLength: 128))
    static func sequence(_ i: Int) -> [Int] { Fixtures.tokens(count: 24, vocabSize: 300, seed: UInt64(1_000 + i)) }

    /// The child's body: runs only when launched by the kill test.
    @Test(.enabled(if: environment[roleVariable] != nil, "runs only as the kill test's child process"))
    func writerLoop() async throws {
        let directory = URL(fileURLWithPath: try #require(Self.environment[Self.directoryVariable]))
        switch Self.environment[Self.roleVariable] {
        case "prefix":
            try Self.markStarted(directory)   // (the moments include opening the directory)
            let store = PrefixStore(weights: Self.weights, configuration: .persistent(in: directory))
            let model = Transformer(weights: Self.weights)
            for i in 0... {
                let cache = model.makeCache()
                try model.forward(Self.sequence(i), cache: cache)
                store.publish(cache, boundaries: [24])
                store.flush()
                if i == 0 { try Self.markWritten(directory) }
            }
        case "journal":
            let cache = ResponseCache<String>(configuration: .init(directory: directory))
            for i in 0 ..< Self.journalEntriesPerWriter { await cache.invalidate(tag: "writer \(getpid()) tag \(i)") }
        default:
            try Self.markStarted(directory)
            let cache = ResponseCache<String>(configuration: .init(directory: directory))
            for i in 0... {
                _ = try await cache.value(for: CacheKey(parts: ["entry \(i)"])) { String(repeating: "answer \(i) ", count: 200) }
                if i == 0 { try Self.markWritten(directory) }
            }
        }
    }

    /// The writer of `role` on `directory`, ready to run.
    static func writer(role: String, directory: URL) -> Process {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        child.arguments = ["--testing-library", "swift-testing", "--filter", "writerLoop"]
        var environment = Self.environment
        environment[roleVariable] = role
        environment[directoryVariable] = directory.path
        environment["SWIFT_BACKTRACE"] = "enable=no"
        child.environment = environment
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        return child
    }

    /// The file beside `directory` a writer creates once it starts writing (outside the directory,
    /// whose every file the checks account for).
    static func startMark(_ directory: URL) -> URL { directory.appendingPathExtension("started") }

    static func markStarted(_ directory: URL) throws { try Data().write(to: startMark(directory)) }

    /// The file beside `directory` a writer creates once its first entry is stored.
    static func writtenMark(_ directory: URL) -> URL { directory.appendingPathExtension("written") }

    static func markWritten(_ directory: URL) throws { try Data().write(to: writtenMark(directory)) }

    /// Launches the writer, lets it open the directory and write for 10–120 ms (ten times that under a
    /// sanitizer), kills it. Waiting for its start rather than a fixed start-up time keeps the
    /// moments in the writing however slowly the process starts (under ThreadSanitizer a fixed 0.3 s
    /// ended before the first entry in all 25 kills).
    static func killWriter(role: String, directory: URL, rng: inout SeededGenerator) throws {
        // Half the kills come after the writer's first entry is stored, so that whole entries exist
        // to be checked however slowly the writer runs (on a loaded machine a kill 120 ms after the
        // start could come before any entry in all 25); the others may come while it opens the store.
        let mark = rng.next() % 2 == 0 ? startMark(directory) : writtenMark(directory)
        for old in [startMark(directory), writtenMark(directory)] { try? FileManager.default.removeItem(at: old) }
        let child = writer(role: role, directory: directory)
        try child.run()
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: mark.path), child.isRunning, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.002)
        }
        // A random moment of the writing; a sanitizer's instrumentation slows the writer about tenfold.
        Thread.sleep(forTimeInterval: Double(10 + rng.next() % 110) / 1_000 * (isSanitized ? 10 : 1))
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        for old in [startMark(directory), writtenMark(directory)] { try? FileManager.default.removeItem(at: old) }
    }

    /// Enough that the two writers fill the journal once between them, so one of them starts a new
    /// one while the other appends.
    static let journalEntriesPerWriter = 700

    // The time limits catch a writer that hangs; under a sanitizer every round runs several times
    // slower (the response cache's took over 3 minutes under AddressSanitizer on a 2-vCPU Zen 4).

    /// Two processes invalidating at once, each recording its invalidations in the directory's
    /// journal, 1,400 in all: the first 1,024 fill a journal, the next starts a new one, and that one
    /// holds every later entry of both, whole and once (appends and the new file hold a lock that
    /// works between processes, not only between two caches of one).
    @Test(.enabled(if: environment[roleVariable] == nil), .timeLimit(.minutes(isSanitized ? 15 : 3)))
    func invalidationJournal_keepsEveryEntryOfTwoProcessesAppendingAtOnce() throws {
        let directory = Fixtures.temporaryFile("journal-writers")
        defer { try? FileManager.default.removeItem(at: directory) }
        let writers = [Self.writer(role: "journal", directory: directory), Self.writer(role: "journal", directory: directory)]
        for writer in writers { try writer.run() }
        for writer in writers { writer.waitUntilExit() }
        #expect(writers.allSatisfy { $0.terminationStatus == 0 })
        let journal = try String(contentsOf: directory.appendingPathComponent(".invalidations"), encoding: .utf8)
        let lines = journal.split(separator: "\n", omittingEmptySubsequences: false).dropLast()   // the text ends with a newline
        #expect(lines.first?.hasPrefix("kvsession-invalidations 1 ") == true)
        let entries = lines.dropFirst()
        #expect(entries.count == 2 * Self.journalEntriesPerWriter - InvalidationJournal.capacity)
        #expect(Set(entries).count == entries.count)   // every tag differs, so every entry does
        #expect(entries.allSatisfy { $0.count == 66 && $0.hasPrefix("t ") && $0.dropFirst(2).allSatisfy(\.isHexDigit) })
    }

    static func entryFiles(_ directory: URL, suffix: String) -> Set<String> {
        Set(((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(suffix) })
    }

    @Test(.enabled(if: environment[roleVariable] == nil), .timeLimit(.minutes(isSanitized ? 15 : 3)))
    func prefixStore_survivesKillsAtRandomMoments() async throws {
        let directory = Fixtures.temporaryFile("crash-prefix")
        defer { try? FileManager.default.removeItem(at: directory) }
        var rng = SeededGenerator(seed: 5)
        var complete: Set<String> = []
        let model = Transformer(weights: Self.weights)
        // Every prefix a file may hold: each sequence's whole 24 tokens, and the shorter heads the
        // store splits off when two sequences begin alike (file name → sequence and length).
        let fingerprint = ModelFingerprint(Self.weights)
        var prefixes: [String: (sequence: Int, length: Int)] = [:]
        for i in 0 ..< 400 {
            for (n, key) in zip(1 ... 24, PrefixKey.keys(fingerprint: fingerprint, tokens: Self.sequence(i), at: Array(1 ... 24))) {
                prefixes["\(key).kvp"] = (i, n)
            }
        }
        for kill in 0 ..< 25 {
            try Self.killWriter(role: "prefix", directory: directory, rng: &rng)
            let store = PrefixStore(weights: Self.weights, configuration: .persistent(in: directory))
            let names = Self.entryFiles(directory, suffix: ".kvp")
            #expect(complete.subtracting(names).count == 0, "kill \(kill): complete entries were lost")
            #expect(!(try FileManager.default.contentsOfDirectory(atPath: directory.path)).contains { $0.hasPrefix(".tmp-") })
            var readable: Set<String> = []
            for name in names {   // (a head may be read through a longer file that begins alike; its child's read needs it)
                guard let (i, n) = prefixes[name] else { continue }
                let cache = model.makeCache()
                let restored = store.restore(into: cache, tokens: Array(Self.sequence(i).prefix(n)) + [1], boundaries: [n])
                if restored.fromDisk == n {
                    #expect(try cache.deviationFromFreshPrefill(model).maxRelativeError <= 1e-4)
                    readable.insert(name)
                }
            }
            // Every file is either whole or was reported and removed, and every entry that was
            // whole before this kill still is (a rewrite of it must not tear it).
            #expect(Self.entryFiles(directory, suffix: ".kvp").subtracting(readable).count == 0, "kill \(kill): a bad file stayed")
            #expect(complete.subtracting(readable).count == 0, "kill \(kill): complete entries no longer read back")
            #expect(store.statistics.rejectedFiles == names.count - readable.count)
            complete = readable
        }
        #expect(complete.count > 0, "the writer never finished an entry")
    }

    @Test(.enabled(if: environment[roleVariable] == nil), .timeLimit(.minutes(isSanitized ? 15 : 3)))
    func responseCache_survivesKillsAtRandomMoments() async throws {
        let directory = Fixtures.temporaryFile("crash-response")
        defer { try? FileManager.default.removeItem(at: directory) }
        var rng = SeededGenerator(seed: 6)
        var complete = 0
        for kill in 0 ..< 25 {
            try Self.killWriter(role: "response", directory: directory, rng: &rng)
            let cache = ResponseCache<String>(configuration: .init(directory: directory))
            #expect(!(try FileManager.default.contentsOfDirectory(atPath: directory.path)).contains { $0.contains(".tmp-") })
            var readable = 0
            for i in 0 ..< 4_000 {
                let answer = try await cache.value(for: CacheKey(parts: ["entry \(i)"]), policy: .cacheOnly) { "" }
                guard answer.origin == .disk else { continue }
                #expect(answer.value == String(repeating: "answer \(i) ", count: 200), "kill \(kill): entry \(i) read back wrong")
                readable += 1
            }
            #expect(readable >= complete, "kill \(kill): complete entries were lost")
            complete = readable
        }
        #expect(complete > 0, "the writer never finished an entry")
    }
}
