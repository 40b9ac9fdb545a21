import LMRuntime
import LMTestSupport
import Testing

struct BPETrainerTests {
    static let corpus = [
        "the cat sat on the mat with the other cat",
        "the dog sat on the log and the cat sat on the dog",
        "a café in the city, a café by the sea 🙂",
    ]

    @Test func train_isDeterministic() throws {
        let a = try BPETrainer(vocabSize: 320).train(on: Self.corpus)
        let b = try BPETrainer(vocabSize: 320).train(on: Self.corpus.reversed())
        #expect(a.pieces == b.pieces)
        #expect(a.scores == b.scores)
    }

    @Test func train_learnsFrequentWordsAsSingleTokens() throws {
        let tokenizer = try BPETrainer(vocabSize: 330).train(on: Self.corpus)
        #expect(tokenizer.encode("the cat sat", bos: false).count == 3)
        // Merges are scored in training order, so the encoder replays them.
        let merged = tokenizer.scores.enumerated().filter { $0.element < 0 }
        #expect(!merged.isEmpty)
    }

    @Test func train_layoutMatchesLlama2cAndKeepsReservedPieces() throws {
        let tokenizer = try BPETrainer(vocabSize: 300, reservedPieces: ["<|x|>"]).train(on: Self.corpus)
        #expect(tokenizer.pieces[Tokenizer.unknown] == Array("<unk>".utf8))
        #expect(tokenizer.pieces[Tokenizer.bos] == Array("\n<s>\n".utf8))
        #expect(tokenizer.pieces[Tokenizer.eos] == Array("\n</s>\n".utf8))
        #expect(tokenizer.pieces[Tokenizer.byteOffset + 0x41] == Array("<0x41>".utf8))
        #expect(tokenizer.id(of: "<|x|>") == Tokenizer.byteOffset + 256)
        #expect(tokenizer.vocabSize <= 300)
    }

    @Test func train_roundTripsAnyTextThroughItsVocabulary() throws {
        let tokenizer = try BPETrainer(vocabSize: 320).train(on: Self.corpus)
        for text in Fixtures.trickyTexts where !text.hasPrefix(" ") {
            #expect(tokenizer.decode(tokenizer.encode(text)) == text)
            #expect(tokenizer.encode(text) == referenceEncode(text, with: tokenizer))
        }
    }

    @Test func train_rejectsEmptyCorpusAndTooSmallVocabulary() {
        #expect(throws: BPETrainerError.emptyCorpus) { try BPETrainer(vocabSize: 400).train(on: ["", ""]) }
        #expect(throws: BPETrainerError.vocabularyTooSmall(requested: 262, minimum: 259 + 18)) {
            try BPETrainer(vocabSize: 262).train(on: ["abcdefghijklmnopq"])
        }
    }
}
