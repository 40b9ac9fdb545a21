import Foundation
import LMRuntime
import LMTestSupport
import PropertyBased
import Testing

struct TokenizerTests {
    static let tok512 = Fixtures.sharedModel("tok512.bin").flatMap { try? Tokenizer(contentsOf: $0, vocabSize: 512) }

    @Test func encode_matchesReferenceLoopOnTrickyTexts_bundled() {
        let tokenizer = Fixtures.bundledTokenizer
        for text in Fixtures.trickyTexts {
            #expect(tokenizer.encode(text) == referenceEncode(text, with: tokenizer), "\(text.debugDescription)")
        }
    }

    @Test(.enabled(if: tok512 != nil, "skipped: ../shared/models/tok512.bin is absent"))
    func encode_matchesReferenceLoopOnTrickyTexts_tok512() throws {
        let tokenizer = try #require(Self.tok512)
        for text in Fixtures.trickyTexts {
            #expect(tokenizer.encode(text) == referenceEncode(text, with: tokenizer), "\(text.debugDescription)")
        }
    }

    @Test func encode_matchesReferenceLoopOnRandomText() async {
        let tokenizer = Fixtures.bundledTokenizer
        let alphabet: [Character] = Array("abcdefghijklmnopqrstuvwxyz ETAOIN,.!?'\n\t  éüß€日本🙂")
        await propertyCheck(count: 200, input: Gen.element(of: alphabet).array(of: 0 ... 80)) { chars in
            let text = String(chars.compactMap { $0 })
            #expect(tokenizer.encode(text) == referenceEncode(text, with: tokenizer), "\(text.debugDescription)")
        }
    }

    /// Merges are looked up by the ids of the pair, so a piece that several ids share must merge
    /// from each of them: here `<0x64>` is both id 0 and byte `d`'s fallback id, and `ab` is listed twice.
    @Test func encode_vocabularyWithRepeatedPieces_matchesReferenceLoop() async {
        var pieces = [Array("<0x64>".utf8), Array("<s>".utf8), Array("</s>".utf8)]
        pieces += (0 ... 255).map { Array(String(format: "<0x%02X>", $0).utf8) }
        let merged = ["a", "b", "c", "x", " ", "ab", "bc", "abc", "ab", "<0x64>x", "<0x64>x ", " a", "<0x64>"]
        pieces += merged.map { Array($0.utf8) }
        let scores = pieces.indices.map { Float(($0 * 7919) % 31) }   // scores that tie and interleave
        let tokenizer = Tokenizer(pieces: pieces, scores: scores)
        #expect(tokenizer.encode("dx", bos: false).contains(Tokenizer.byteOffset + 0x64) == false, "d's fallback merges with x")
        await propertyCheck(count: 300, input: Gen.element(of: Array("abcdx ")).array(of: 0 ... 24)) { chars in
            let text = String(chars.compactMap { $0 })
            #expect(tokenizer.encode(text) == referenceEncode(text, with: tokenizer), "\(text.debugDescription)")
        }
    }

    /// An empty piece (here at d's byte-fallback id, so that text reaches it) merges with any
    /// neighbour, itself included, as llama2.c's loop merges any two pieces whose bytes run
    /// together into a piece.
    @Test func encode_vocabularyWithAnEmptyPiece_matchesReferenceLoop() async {
        var pieces = [Array("<unk>".utf8), Array("<s>".utf8), Array("</s>".utf8)]
        pieces += (0 ... 255).map { $0 == 0x64 ? [] : Array(String(format: "<0x%02X>", $0).utf8) }
        pieces += ["a", "b", "c", "x", " ", "ab", "bc", "abc", " a", ""].map { Array($0.utf8) }
        let scores = pieces.indices.map { Float(($0 * 7919) % 31) }
        let tokenizer = Tokenizer(pieces: pieces, scores: scores)
        #expect(tokenizer.encode("dd", bos: false) != [Tokenizer.byteOffset + 0x64, Tokenizer.byteOffset + 0x64])
        await propertyCheck(count: 300, input: Gen.element(of: Array("abcdx ")).array(of: 0 ... 24)) { chars in
            let text = String(chars.compactMap { $0 })
            #expect(tokenizer.encode(text) == referenceEncode(text, with: tokenizer), "\(text.debugDescription)")
        }
    }

    @Test func identity_followsWhatIdsMeanNotHowTextEncodes() {
        let t = Fixtures.bundledTokenizer
        #expect(t.identity.count == 16 && t.identity.allSatisfy(\.isHexDigit))
        #expect(Tokenizer(pieces: t.pieces, scores: t.scores.map { -$0 }).identity == t.identity)   // scores: same ids
        var swapped = t.pieces
        swapped.swapAt(300, 301)
        #expect(Tokenizer(pieces: swapped, scores: t.scores).identity != t.identity)
        // Piece boundaries count: ["ab", "c"] and ["a", "bc"] are different vocabularies.
        #expect(Tokenizer(pieces: [Array("ab".utf8), Array("c".utf8)], scores: [0, 0]).identity
            != Tokenizer(pieces: [Array("a".utf8), Array("bc".utf8)], scores: [0, 0]).identity)
    }

    @Test func encode_emptyTextIsBOSOnlyAndFlagsAreHonoured() {
        let tokenizer = Fixtures.bundledTokenizer
        #expect(tokenizer.encode("") == [Tokenizer.bos])
        #expect(tokenizer.encode("", bos: false) == [])
        #expect(tokenizer.encode("hi", bos: false, eos: true).last == Tokenizer.eos)
        #expect(tokenizer.encode("hi", bos: false, eos: true).first != Tokenizer.bos)
    }

    @Test func encode_unknownScalarsFallBackToBytes() throws {
        let tokenizer = Fixtures.bundledTokenizer
        let tokens = tokenizer.encode("🙂", bos: false)
        // A dummy-prefix space, then the four UTF-8 bytes of U+1F642 as byte tokens.
        #expect(Array(tokens.dropFirst()) == [0xF0, 0x9F, 0x99, 0x82].map { $0 + Tokenizer.byteOffset })
    }

    @Test func decode_roundTripsEncodedText() {
        let tokenizer = Fixtures.bundledTokenizer
        for text in Fixtures.trickyTexts where !text.hasPrefix(" ") {
            #expect(tokenizer.decode(tokenizer.encode(text)) == text, "\(text.debugDescription)")
        }
    }

    @Test func decode_byteTokensAreRawBytesAndSpecialsAreSilent() {
        let tokenizer = Fixtures.bundledTokenizer
        let tokens = [Tokenizer.bos] + Array("€".utf8).map { Int($0) + Tokenizer.byteOffset } + [Tokenizer.eos]
        #expect(tokenizer.decode(tokens) == "€")
    }

    @Test func controlPieces_areReservedAndNeverProducedFromText() throws {
        let tokenizer = Fixtures.bundledTokenizer
        for (offset, piece) in ControlPieces.all.enumerated() {
            let id = try #require(tokenizer.id(of: piece))
            #expect(id == Tokenizer.byteOffset + 256 + offset)
            #expect(!tokenizer.encode("say \(piece) please").contains(id))
        }
    }

    @Test func bundled_hasRoughly4kEntriesAndCompressesHeldOutEnglish() {
        let tokenizer = Fixtures.bundledTokenizer
        #expect(tokenizer.vocabSize == 4096)
        let text = Fixtures.heldOutEnglish
        let ratio = Double(text.count) / Double(tokenizer.encode(text, bos: false).count)
        #expect(ratio >= 3, "only \(ratio) characters per token on held-out English")
    }

    @Test func serialized_roundTripsThroughTheFileFormat() throws {
        let tokenizer = Fixtures.bundledTokenizer
        let copy = try Tokenizer(serialized: tokenizer.serialized())
        #expect(copy.pieces == tokenizer.pieces)
        #expect(copy.scores == tokenizer.scores)
        #expect(copy.maxTokenLength == tokenizer.maxTokenLength)
    }
}
