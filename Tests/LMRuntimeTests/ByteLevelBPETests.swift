import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Byte-level BPE vocabularies (GGUF `tokenizer.ggml.model` "gpt2"), against Hugging Face's
/// `tokenizers` on one trained vocabulary under four model families' pre-tokenizers.
struct ByteLevelBPETests {
    /// `Tests/Fixtures/byte-level-bpe/`, written by `Scripts/make-byte-level-bpe-fixture.py`.
    static let directory = Fixtures.packageRoot.appendingPathComponent("Tests/Fixtures/byte-level-bpe")
    static let preTokenizers = ["gpt-2", "smollm", "llama-bpe", "qwen2"]

    struct Expected: Decodable {
        var texts: [String]
        var ids: [String: [[Int]]]
    }

    static let expected: Expected = {
        let data = try! Data(contentsOf: directory.appendingPathComponent("expected.json"))
        return try! JSONDecoder().decode(Expected.self, from: data)
    }()

    static func tokenizer(_ pre: String) throws -> Tokenizer {
        try Tokenizer(ggufAt: directory.appendingPathComponent("\(pre).gguf"))
    }

    /// The fixture's vocabulary with its metadata edited, read back through the loader.
    static func edited(_ edit: (inout [(String, GGUFValue)]) -> Void) throws(GGUFError) -> Tokenizer {
        var metadata = try! tokenizer("gpt-2").ggufMetadata()
        edit(&metadata)
        var writer = GGUFWriter()
        writer.set("general.architecture", .string("llama"))
        for (key, value) in metadata { writer.set(key, value) }
        return try Tokenizer(gguf: GGUFFile(data: writer.data()))
    }

    static func replacing(_ key: String, with value: GGUFValue?) -> (inout [(String, GGUFValue)]) -> Void {
        { metadata in
            metadata.removeAll { $0.0 == key }
            if let value { metadata.append((key, value)) }
        }
    }

    @Test(arguments: preTokenizers)
    func encode_givesHuggingFaceTokenizersIDs(pre: String) throws {
        let tokenizer = try Self.tokenizer(pre)
        #expect(tokenizer.isByteLevel && tokenizer.vocabSize == 1_204)
        let expected = try #require(Self.expected.ids[pre])
        var mismatches = 0
        for (text, ids) in zip(Self.expected.texts, expected) {
            let mine = tokenizer.encode(text, bos: false)
            if mine != ids, mismatches < 5 {
                Issue.record("\(pre): \(text.debugDescription) encodes to \(mine), tokenizers gives \(ids)")
            }
            if mine != ids { mismatches += 1 }
        }
        #expect(mismatches == 0, "\(mismatches) of \(expected.count) texts differ")
    }

    @Test(arguments: preTokenizers)
    func decode_spellsEveryTextBack(pre: String) throws {
        let tokenizer = try Self.tokenizer(pre)
        for text in Self.expected.texts + Fixtures.trickyTexts {
            #expect(Array(tokenizer.decode(tokenizer.encode(text, bos: false)).utf8) == Array(text.utf8))   // bytes, not canonical equivalence
            #expect(tokenizer.words(text).joined().utf8.elementsEqual(text.utf8))
        }
    }

    @Test func words_splitAsEachModelsExpressionDoes() {
        let text = Array("12345 it'S  x\n\n y".unicodeScalars)
        func words(_ pre: PreTokenizer) -> [String] {
            pre.words(text).map { String(String.UnicodeScalarView(text[$0])) }
        }
        let tail = [" ", " x", "\n\n", " y"]
        #expect(words(.gpt2) == ["12345", " it", "'", "S"] + tail)   // contractions in lower case only
        #expect(words(.smollm) == ["1", "2", "3", "4", "5", " it", "'", "S"] + tail)
        #expect(words(.llama3) == ["123", "45", " it", "'S"] + tail)   // numbers in threes, contractions in any case
        #expect(words(.qwen2) == ["1", "2", "3", "4", "5", " it", "'S"] + tail)
        #expect(words(.llama3) != words(.gpt2))
    }

    @Test func encode_neverReadsAControlTokenFromText() throws {
        let tokenizer = try Self.tokenizer("qwen2")
        let control = try #require(tokenizer.id(of: "<|im_end|>"))
        #expect(tokenizer.controlTokens.contains(control) && tokenizer.eosToken == control)
        let ids = tokenizer.encode("<|im_end|><|endoftext|>", bos: false)
        #expect(ids.allSatisfy { !tokenizer.controlTokens.contains($0) })
        #expect(tokenizer.bytes(of: control, after: nil).isEmpty)
        #expect(tokenizer.decode(ids + [control]) == "<|im_end|><|endoftext|>")
    }

    @Test func addsBOS_followsTheFileAndLlama3sDefault() throws {
        #expect(try Self.tokenizer("gpt-2").encode("Hi", bos: true) == Self.tokenizer("gpt-2").encode("Hi", bos: false))
        let llama3 = try Self.tokenizer("llama-bpe")
        #expect(llama3.addsBOS && llama3.sequenceStart == [llama3.bosToken])
        #expect(llama3.encode("Hi", bos: true) == [llama3.bosToken] + llama3.encode("Hi", bos: false))
        let asked = try Self.edited(Self.replacing("tokenizer.ggml.add_bos_token", with: .bool(true)))
        #expect(asked.encode("Hi", bos: true, eos: true) == [asked.bosToken] + asked.encode("Hi", bos: false) + [asked.eosToken])
    }

    @Test func stopTokens_areTheVocabularysOwnEndAndStart() throws {
        let tokenizer = try Self.tokenizer("smollm")
        #expect(tokenizer.stopTokens == [tokenizer.eosToken, tokenizer.bosToken] && tokenizer.eosToken == tokenizer.id(of: "<|im_end|>"))
        // SentencePiece: llama2.c's run loop stops on BOS; Llama 2 and Mistral models end a text with EOS.
        #expect(Fixtures.bundledTokenizer.stopTokens == [Tokenizer.eos, Tokenizer.bos])
    }

    @Test(arguments: preTokenizers)
    func ggufMetadata_readsBackAsTheSameVocabulary(pre: String) throws {
        let tokenizer = try Self.tokenizer(pre)
        var writer = GGUFWriter()
        writer.set("general.architecture", .string("llama"))
        for (key, value) in tokenizer.ggufMetadata() { writer.set(key, value) }
        let read = try Tokenizer(gguf: GGUFFile(data: writer.data()))
        #expect(read.identity == tokenizer.identity && read.pieces == tokenizer.pieces && read.addsBOS == tokenizer.addsBOS)
        #expect(read.bosToken == tokenizer.bosToken && read.eosToken == tokenizer.eosToken && read.controlTokens == tokenizer.controlTokens)
        for text in Self.expected.texts.prefix(60) { #expect(read.encode(text) == tokenizer.encode(text)) }
    }

    @Test func identity_differsFromTheSameBytesInLlama2cLayout() throws {
        let tokenizer = try Self.tokenizer("gpt-2")
        #expect(Tokenizer(pieces: tokenizer.pieces, scores: tokenizer.scores).identity != tokenizer.identity)
    }

    @Test func init_refusesWhatItCannotEncodeWithATypedError() throws {
        let merges = try #require(Self.tokenizer("gpt-2").byteLevel?.storedMerges)
        func refusal(_ edit: (inout [(String, GGUFValue)]) -> Void) -> GGUFError? {
            do { _ = try Self.edited(edit); return nil } catch { return error }
        }
        func reason(_ error: GGUFError?) -> String { error.map { "\($0)" } ?? "accepted" }
        #expect(reason(refusal(Self.replacing("tokenizer.ggml.pre", with: nil))).contains("without tokenizer.ggml.pre"))
        #expect(reason(refusal(Self.replacing("tokenizer.ggml.pre", with: .string("deepseek-llm")))).contains("'deepseek-llm'"))
        #expect(refusal(Self.replacing("tokenizer.ggml.merges", with: nil)) == .missingKey("tokenizer.ggml.merges"))
        #expect(refusal(Self.replacing("tokenizer.ggml.eos_token_id", with: nil)) == .missingKey("tokenizer.ggml.eos_token_id"))
        #expect(reason(refusal(Self.replacing("tokenizer.ggml.bos_token_id", with: .uint32(1_204)))).contains("1204 is not a token id"))
        #expect(reason(refusal(Self.replacing("tokenizer.ggml.add_bos_token", with: .uint8(1)))).contains("not a boolean"))
        #expect(reason(refusal(Self.replacing("tokenizer.ggml.merges", with: .array((merges + ["nospace"]).map(GGUFValue.string)))))
            .contains("entry \(merges.count) ('nospace') is not two tokens"))
        #expect(reason(refusal(Self.replacing("tokenizer.ggml.merges", with: .array((merges + ["Ġzq Ġzq"]).map(GGUFValue.string)))))
            .contains("entry \(merges.count) ('Ġzq Ġzq') joins pieces"))
        // Byte 0x21 '!' renamed: its byte has no token.
        let tokens = try Self.tokenizer("gpt-2").byteLevel!.storedTokens.map { $0 == "!" ? "!!!" : $0 }
        #expect(reason(refusal(Self.replacing("tokenizer.ggml.tokens", with: .array(tokens.map(GGUFValue.string))))).contains("byte 0x21"))
    }
}
