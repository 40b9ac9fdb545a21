import Foundation
import LMRuntime
import LMTestSupport
import PropertyBased
import Testing

/// Whatever the runtime writes it reads back unchanged: tokenizers, checkpoints and GGUF files,
/// over generated values (odd pieces, scores and shapes included).
struct RoundTripPropertyTests {
    /// A vocabulary in llama2.c's layout (specials, 256 byte pieces) plus `extra` generated pieces:
    /// arbitrary bytes (invalid UTF-8 and empty pieces too) unless `text` asks for valid UTF-8.
    static func vocabulary(seed: UInt64, extra: Int, text: Bool) -> Tokenizer {
        var rng = SeededGenerator(seed: seed)
        var pieces: [[UInt8]] = [Array("<unk>".utf8), Array("<s>".utf8), Array("</s>".utf8)]
        pieces += (0 ..< 256).map { Array(String(format: "<0x%02X>", $0).utf8) }
        let alphabet = Array("ab cé日🙂\n\"\\".unicodeScalars)
        for _ in 0 ..< extra {
            let length = Int(rng.next() % 7)
            if text {
                pieces.append(Array(String(String.UnicodeScalarView((0 ..< length).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })).utf8))
            } else {
                pieces.append((0 ..< length).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            }
        }
        let specials: [Float] = [0, -0.0, .leastNonzeroMagnitude, -1e30, 1e30, .greatestFiniteMagnitude]
        let scores = pieces.indices.map { i -> Float in
            rng.next() % 4 == 0 ? specials[Int(rng.next() % UInt64(specials.count))] : Float(Int64(rng.next() % 20001) - 10000) / 7
        }
        return Tokenizer(pieces: pieces, scores: scores)
    }

    static func bits(_ w: ModelWeights) -> [[UInt32]] {
        ([w.tokenEmbedding.floatMatrix(), w.finalNorm, w.classifier.floatMatrix()]
            + w.layers.flatMap { [$0.attentionNorm, $0.qkv.floatMatrix(), $0.wo.floatMatrix(), $0.ffnNorm,
                                  $0.gateUp.floatMatrix(), $0.down.floatMatrix()] })
            .map { m in (0 ..< m.rows).flatMap { r in (0 ..< m.cols).map { m[r, $0].bitPattern } } }
    }

    /// A small random config the runtime accepts.
    static func config(_ choice: [Int]) -> ModelConfig {
        let heads = [1, 2, 4][choice[0] % 3], headDim = [2, 4, 8][choice[1] % 3]
        let kvHeads = [1, heads / 2, heads][choice[2] % 3]
        return ModelConfig(name: "p", dim: heads * headDim, hiddenDim: 1 + choice[3] % 40, layerCount: 1 + choice[4] % 3,
                           headCount: heads, kvHeadCount: max(1, kvHeads), vocabSize: 1 + choice[5] % 300,
                           contextLength: 1 + choice[6] % 64, normEpsilon: [1e-5, 1e-6, 0.5][choice[7] % 3],
                           ropeTheta: [10000, 500000, 1.5][choice[8] % 3], sharedClassifier: choice[9] % 2 == 0)
    }

    @Test func tokenizer_serializedRoundTripsAnyVocabulary() async throws {
        await propertyCheck(count: 60, input: Gen.int(in: 0 ... 1_000_000).array(of: 2 ... 2)) { input in
            let tokenizer = Self.vocabulary(seed: UInt64(input[0]), extra: input[1] % 300, text: false)
            let data = tokenizer.serialized()
            guard let back = try? Tokenizer(serialized: data) else {
                Issue.record("a serialized vocabulary did not load (seed \(input[0]))")
                return
            }
            #expect(back.pieces == tokenizer.pieces)
            #expect(back.scores.map(\.bitPattern) == tokenizer.scores.map(\.bitPattern))
            #expect(back.serialized() == data)
        }
    }

    @Test func checkpoint_roundTripsAnyShapeBitForBit() async throws {
        await propertyCheck(count: 30, input: Gen.int(in: 0 ... 1_000_000).array(of: 11 ... 11)) { choice in
            var config = Self.config(choice)
            // llama2.c's header has no epsilon or theta: a model with others is refused, not written as another.
            if config.normEpsilon != 1e-5 || config.ropeTheta != 10000 {
                #expect(throws: ModelLoadError.self) { try ModelWeights.synthetic(config, seed: 1).checkpointData() }
                (config.normEpsilon, config.ropeTheta) = (1e-5, 10000)
            }
            let weights = try! ModelWeights.synthetic(config, seed: UInt64(choice[10]))
            let url = Fixtures.temporaryFile("roundtrip.bin")
            defer { try? FileManager.default.removeItem(at: url) }
            try! weights.checkpointData().write(to: url)
            let back = try! ModelWeights.checkpoint(at: url)
            var expected = config
            (expected.name, expected.weights) = (back.config.name, back.config.weights)
            #expect(back.config == expected)
            #expect(Self.bits(back) == Self.bits(weights))
        }
    }

    @Test func gguf_roundTripsAnyShapeAndVocabulary() async throws {
        await propertyCheck(count: 30, input: Gen.int(in: 0 ... 1_000_000).array(of: 11 ... 11)) { choice in
            var config = Self.config(choice)
            let tokenizer = Self.vocabulary(seed: UInt64(choice[10]), extra: choice[5] % 40, text: true)
            config.vocabSize = tokenizer.vocabSize
            let weights = try! ModelWeights.synthetic(config, seed: UInt64(choice[10]))
            let data = try! weights.ggufData(tokenizer: tokenizer)
            let back = try! ModelWeights.gguf(data: data)
            var expected = config
            (expected.name, expected.weights) = (back.config.name, back.config.weights)
            #expect(back.config == expected)   // GGUF keeps epsilon and theta
            #expect(Self.bits(back) == Self.bits(weights))
            let vocabulary = try! Tokenizer(gguf: GGUFFile(data: data))
            #expect(vocabulary.pieces == tokenizer.pieces)
            #expect(vocabulary.scores.map(\.bitPattern) == tokenizer.scores.map(\.bitPattern))
        }
    }
}
