import Foundation
import LMRuntime
import LMTestSupport
import Testing

/// The llama2.c reference: stories260K with tok512, greedy outputs in reference-greedy.json.
struct ReferenceModelTests {
    struct Case: Decodable {
        let prompt: String
        let prompt_token_ids: [Int]
        let generated_token_ids: [Int]
        let stop_reason: String
        let text: String
        let first_step_logits: [Float]
    }

    struct Reference: Decodable { let cases: [Case] }

    static let files: (model: URL, tokenizer: URL, reference: URL)? = {
        guard let m = Fixtures.sharedModel("stories260K.bin"), let t = Fixtures.sharedModel("tok512.bin"),
              let r = Fixtures.sharedModel("reference-greedy.json") else { return nil }
        return (m, t, r)
    }()

    static let skipMessage = "skipped: ../shared/models/{stories260K.bin,tok512.bin,reference-greedy.json} are absent"

    func load() throws -> (Transformer, Tokenizer, [Case]) {
        let files = try #require(Self.files, Comment(rawValue: Self.skipMessage))
        let weights = try ModelWeights.checkpoint(at: files.model)
        let tokenizer = try Tokenizer(contentsOf: files.tokenizer, vocabSize: weights.config.vocabSize)
        let reference = try JSONDecoder().decode(Reference.self, from: Data(contentsOf: files.reference))
        return (Transformer(weights: weights), tokenizer, reference.cases)
    }

    @Test(.enabled(if: files != nil, Comment(rawValue: skipMessage)))
    func encode_matchesLlama2cPromptIds() throws {
        let (_, tokenizer, cases) = try load()
        for c in cases { #expect(tokenizer.encode(c.prompt) == c.prompt_token_ids, "\(c.prompt)") }
    }

    @Test(.enabled(if: files != nil, Comment(rawValue: skipMessage)))
    func forward_firstStepLogitsMatchWithin1e4() throws {
        let (model, _, cases) = try load()
        for c in cases {
            let logits = try model.forward(c.prompt_token_ids, cache: model.makeCache()).toArray()
            let worst = zip(logits, c.first_step_logits).map { abs($0 - $1) }.max() ?? .infinity
            #expect(worst <= 1e-4, "max |Δlogit| = \(worst) for \(c.prompt)")
        }
    }

    @Test(.enabled(if: files != nil, Comment(rawValue: skipMessage)))
    func generate_greedyReproducesLlama2cTokensAndText() throws {
        let (model, tokenizer, cases) = try load()
        let steps = 256   // run.c's -n: positions 0..<256, prompt included
        for c in cases {
            var sampler = try Sampler(.greedy)
            let out = try model.generate(prompt: c.prompt_token_ids, maxNewTokens: steps - c.prompt_token_ids.count + 1,
                                         sampler: &sampler, cache: model.makeCache())
            #expect(out.generatedTokens == c.generated_token_ids, "\(c.prompt)")
            #expect(out.stopReason == (c.stop_reason == "bos" ? .stopToken : .maxTokens))
            #expect(tokenizer.decode(c.prompt_token_ids + out.generatedTokens) + "\n" == c.text)
        }
    }
}
