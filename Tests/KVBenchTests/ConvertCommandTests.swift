import Foundation
import LMRuntime
import LMTestSupport
import Testing

/// `kvbench convert` and `--gguf`: a model survives the trip to GGUF and back, token for token.
struct ConvertCommandTests {
    struct Generated: Decodable { let generated_token_ids: [Int] }

    func generate(_ model: [String]) throws -> [Int] {
        let run = try KVBenchTests.run(["generate"] + model + ["--prompt", "Plan a short tempo run", "--max-tokens", "8",
                                                               "--format", "json"])
        #expect(run.status == 0, "\(run.stderr)")
        return try JSONDecoder().decode(Generated.self, from: Data(run.stdout.utf8)).generated_token_ids
    }

    @Test func convert_bundledModelToGGUFAndBackGivesTheSameTokens() throws {
        let gguf = Fixtures.temporaryFile("tiny.gguf"), bin = Fixtures.temporaryFile("tiny.bin"), tok = Fixtures.temporaryFile("tok.bin")
        defer { for url in [gguf, bin, tok] { try? FileManager.default.removeItem(at: url) } }
        let toGGUF = try KVBenchTests.run(["convert", "--model", "tiny", "--output", gguf.path])
        #expect(toGGUF.status == 0 && toGGUF.stdout.contains("GGUF v3"), "\(toGGUF.stderr)")
        let back = try KVBenchTests.run(["convert", "--gguf", gguf.path, "--output", bin.path, "--tokenizer-output", tok.path])
        #expect(back.status == 0, "\(back.stderr)")
        let expected = try generate(["--model", "tiny"])
        #expect(expected.count == 8)
        #expect(try generate(["--gguf", gguf.path]) == expected)
        #expect(try generate(["--checkpoint", bin.path, "--tokenizer", tok.path]) == expected)
        #expect(try Data(contentsOf: tok) == Fixtures.bundledTokenizer.serialized())
        // The converted file is a plain GGUF v3 with the llama keys and the vocabulary.
        let file = try GGUFFile(data: Data(contentsOf: gguf))
        #expect(file.metadata["general.architecture"] == .string("llama"))
        #expect(file.metadata["tokenizer.ggml.tokens"]?.arrayValue?.count == Fixtures.bundledTokenizer.vocabSize)
    }

    @Test func convert_aByteLevelVocabularyRunsAndIsNeverWrittenAsATokenizerBin() throws {
        let vocabulary = try Tokenizer(ggufAt: Fixtures.packageRoot.appendingPathComponent("Tests/Fixtures/byte-level-bpe/smollm.gguf"))
        let gguf = Fixtures.temporaryFile("byte-level.gguf"), bin = Fixtures.temporaryFile("byte-level.bin"), tok = Fixtures.temporaryFile("byte-level-tok.bin")
        defer { for url in [gguf, bin, tok] { try? FileManager.default.removeItem(at: url) } }
        try Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: vocabulary.vocabSize, contextLength: 64)).ggufData(tokenizer: vocabulary).write(to: gguf)
        let tokens = try generate(["--gguf", gguf.path])
        #expect(!tokens.isEmpty && tokens.allSatisfy { !vocabulary.controlTokens.contains($0) || vocabulary.stopTokens.contains($0) })
        // llama2.c's tokenizer.bin has no place for ranked merges: refused before either file is written.
        let back = try KVBenchTests.run(["convert", "--gguf", gguf.path, "--output", bin.path, "--tokenizer-output", tok.path])
        #expect(back.status != 0 && back.stderr.contains("byte-level BPE"), "\(back.stderr)")
        #expect(!FileManager.default.fileExists(atPath: bin.path) && !FileManager.default.fileExists(atPath: tok.path))
    }

    @Test func convert_aVocabularyWithControlTokensIsNeverWrittenAsATokenizerBin() throws {
        let vocabulary = try Tokenizer(ggufAt: Fixtures.mistralV3Vocabulary)
        let gguf = Fixtures.temporaryFile("mistral-v3.gguf"), bin = Fixtures.temporaryFile("mistral-v3.bin"), tok = Fixtures.temporaryFile("mistral-v3-tok.bin")
        defer { for url in [gguf, bin, tok] { try? FileManager.default.removeItem(at: url) } }
        try Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: vocabulary.vocabSize, contextLength: 64)).ggufData(tokenizer: vocabulary).write(to: gguf)
        #expect(try !generate(["--gguf", gguf.path]).isEmpty)
        // Read back from a tokenizer.bin, its byte pieces would be taken from 3 and `[INST]` as text.
        let back = try KVBenchTests.run(["convert", "--gguf", gguf.path, "--output", bin.path, "--tokenizer-output", tok.path])
        #expect(back.status != 0 && back.stderr.contains("control tokens or byte pieces"), "\(back.stderr)")
        #expect(!FileManager.default.fileExists(atPath: bin.path) && !FileManager.default.fileExists(atPath: tok.path))
    }

    @Test func convert_q8_0IsSmallerAndStillRuns() throws {
        let f32 = Fixtures.temporaryFile("tiny-f32.gguf"), q8 = Fixtures.temporaryFile("tiny-q8.gguf")
        defer { for url in [f32, q8] { try? FileManager.default.removeItem(at: url) } }
        #expect(try KVBenchTests.run(["convert", "--model", "tiny", "--output", f32.path]).status == 0)
        #expect(try KVBenchTests.run(["convert", "--model", "tiny", "--output", q8.path, "--type", "q8_0"]).status == 0)
        let f32Bytes = try Data(contentsOf: f32).count, q8Bytes = try Data(contentsOf: q8).count
        #expect(Double(q8Bytes) < 0.4 * Double(f32Bytes), "\(q8Bytes) vs \(f32Bytes)")
        #expect(try generate(["--gguf", q8.path]).count == 8)
    }
}
