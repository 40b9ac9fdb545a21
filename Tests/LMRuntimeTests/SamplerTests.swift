import Foundation
import LMRuntime
import LMTestSupport
import Testing

struct SamplerTests {
    static let logits = Matrix(rows: 1, cols: 6, values: [0.5, 2.0, -1.0, 1.5, 2.0, 0.0])

    func draws(_ strategy: SamplingStrategy, seed: UInt64, count: Int = 4000) throws -> [Int] {
        var sampler = try Sampler(strategy, seed: seed)
        return (0 ..< count).map { _ in sampler.sample(Self.logits) }
    }

    @Test func sample_greedyPicksFirstLargest() throws {
        #expect(try draws(.greedy, seed: 1, count: 3) == [1, 1, 1])
        #expect(try draws(.temperature(0), seed: 1, count: 3) == [1, 1, 1])
    }

    @Test func sample_sameSeedSameTokensOtherSeedOtherTokens() throws {
        let a = try draws(.temperature(1), seed: 42), b = try draws(.temperature(1), seed: 42)
        #expect(a == b)
        #expect(try draws(.temperature(1), seed: 43) != a)
    }

    @Test func sample_temperatureFollowsSoftmax() throws {
        let values = Self.logits.toArray()
        let z = values.map { exp(Double($0)) }.reduce(0, +)
        let counts = try draws(.temperature(1), seed: 7, count: 20000).reduce(into: [Int](repeating: 0, count: 6)) { $0[$1] += 1 }
        for (i, v) in values.enumerated() {
            let expected = exp(Double(v)) / z
            #expect(abs(Double(counts[i]) / 20000 - expected) < 0.015, "token \(i)")
        }
    }

    @Test func sample_topKOnlyDrawsTheKMostLikely() throws {
        #expect(Set(try draws(.topK(2, temperature: 1), seed: 3)) == [1, 4])
        #expect(Set(try draws(.topK(1, temperature: 5), seed: 3)) == [1])
    }

    @Test func sample_topPKeepsTheSmallestNucleus() throws {
        // Probabilities ≈ 0.332, 0.332 (ids 1, 4), 0.201 (id 3), then 0.074, 0.045, 0.017.
        #expect(Set(try draws(.topP(0.5, temperature: 1), seed: 9)) == [1, 4])
        #expect(Set(try draws(.topP(0.7, temperature: 1), seed: 9)) == [1, 3, 4])
        #expect(Set(try draws(.topP(1, temperature: 1), seed: 9)).count == 6)
    }
}
