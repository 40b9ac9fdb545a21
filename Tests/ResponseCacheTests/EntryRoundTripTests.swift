import Foundation
import ResponseCache
import Testing

/// An entry written to disk reads back, in a cache that never saw it, equal to what was stored.
struct EntryRoundTripTests {
    struct Summary: Codable, Sendable, Equatable {
        var title: String
        var scores: [Double]
        var note: String?
        var nested: [[String: Int]]
    }

    static func summary(_ seed: UInt64) -> Summary {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        func next() -> Int {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return Int(state % 1_000_003)
        }
        let pieces = ["a", "\"", "\\", "\n", "\u{0}", "日本", "🙂", "é", "</script>", "\u{2028}", " "]
        let text = (0 ..< next() % 12).map { _ in pieces[next() % pieces.count] }.joined()
        let numbers: [Double] = [0, -0.0, .leastNonzeroMagnitude, Double.leastNormalMagnitude / 3, -1e300, 0.1, 1.0 / 3, 123_456_789.125, .greatestFiniteMagnitude]
        return Summary(title: text, scores: (0 ..< next() % 6).map { _ in numbers[next() % numbers.count] },
                       note: next() % 2 == 0 ? nil : String(text.reversed()),
                       nested: (0 ..< next() % 3).map { _ in ["k\(next() % 5)": next() - 500_000] })
    }

    @Test func diskEntry_roundTripsGeneratedValuesIntoAFreshCache() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let values = (0 ..< 60 as Range<UInt64>).map(Self.summary)
        let writer = ResponseCache<Summary>(configuration: .init(directory: directory))
        for (i, value) in values.enumerated() {
            _ = try await writer.value(for: CacheKey(parts: ["entry \(i)"])) { value }
        }
        let reader = ResponseCache<Summary>(configuration: .init(directory: directory))   // nothing in memory
        for (i, value) in values.enumerated() {
            let answer = try await reader.value(for: CacheKey(parts: ["entry \(i)"]), policy: .cacheOnly) { Summary(title: "", scores: [], nested: []) }
            #expect(answer.origin == .disk, "entry \(i)")
            #expect(answer.value == value, "entry \(i)")
            #expect(answer.value?.scores.map(\.bitPattern) == value.scores.map(\.bitPattern), "entry \(i): -0.0 and subnormals too")
        }
    }
}
