import LMRuntime
import LMTestSupport
import Testing

/// The logit comparison `kvbench kernels` reports for f16 against f32.
struct LogitDeviationTests {
    @Test func measure_aModelAgainstItselfDeviatesNowhere() throws {
        let model = Transformer(weights: Fixtures.tinyWeights())
        let d = try LogitDeviation.measure(model, against: model, prompt: [1, 5, 9], tokens: 20)
        #expect(d.positions == 20 && d.identicalGreedyPrefix == 20 && d.argmaxAgreement == 1)
        #expect(d.maxAbsoluteError == 0 && d.maxKLDivergence == 0 && d.maxReferenceLogit > 0)
    }

    @Test func measure_halfAgainstFloatIsSmallButNotZero() throws {
        let f32 = Transformer(weights: Fixtures.tinyWeights(HalfPrecisionTests.f32Config))
        let f16 = Transformer(weights: Fixtures.tinyWeights(HalfPrecisionTests.f16Config))
        let d = try LogitDeviation.measure(f16, against: f32, prompt: [1, 2, 3], tokens: 30)
        #expect(d.positions == 30 && d.maxAbsoluteError > 0 && d.maxAbsoluteError < 0.05 * max(1, d.maxReferenceLogit))
        #expect(d.meanKLDivergence > 0 && d.meanKLDivergence <= d.maxKLDivergence && d.maxKLDivergence < 1e-3)
        #expect(d.identicalGreedyPrefix <= d.positions && d.argmaxAgreement > 0.9)
        // Another model entirely is far away: the measure can tell.
        let other = Transformer(weights: Fixtures.tinyWeights(HalfPrecisionTests.f32Config, seed: 8))
        let far = try LogitDeviation.measure(other, against: f32, prompt: [1, 2, 3], tokens: 30)
        #expect(far.meanKLDivergence > 100 * d.meanKLDivergence)
    }

    @Test func measure_capsPositionsAtTheContext() throws {
        let model = Transformer(weights: Fixtures.tinyWeights())   // context 96
        let d = try LogitDeviation.measure(model, against: model, prompt: Array(repeating: 3, count: 90), tokens: 50)
        #expect(d.positions == 6)
    }
}
