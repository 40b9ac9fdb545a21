import Foundation
import LMRuntime
import LMTestSupport
import Testing

/// A GGUF encoder written independently of the package's writer, byte by byte from the format
/// description, so the reader is checked against files it did not produce (and so tests can
/// build malformed files).
struct HandGGUF {
    var version: UInt32 = 3
    var metadata: [(String, UInt32, [UInt8])] = []
    var tensors: [(name: String, dims: [UInt64], type: UInt32, data: [UInt8])] = []

    static func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
    static func str(_ s: String) -> [UInt8] { le(UInt64(s.utf8.count)) + Array(s.utf8) }

    mutating func u32(_ key: String, _ v: UInt32) { metadata.append((key, 4, Self.le(v))) }
    mutating func f32(_ key: String, _ v: Float) { metadata.append((key, 6, Self.le(v.bitPattern))) }
    mutating func string(_ key: String, _ v: String) { metadata.append((key, 8, Self.str(v))) }
    mutating func strings(_ key: String, _ v: [String]) {
        metadata.append((key, 9, Self.le(UInt32(8)) + Self.le(UInt64(v.count)) + v.flatMap(Self.str)))
    }
    mutating func floats(_ key: String, _ v: [Float]) {
        metadata.append((key, 9, Self.le(UInt32(6)) + Self.le(UInt64(v.count)) + v.flatMap { Self.le($0.bitPattern) }))
    }
    mutating func ints(_ key: String, _ v: [Int32]) {
        metadata.append((key, 9, Self.le(UInt32(5)) + Self.le(UInt64(v.count)) + v.flatMap { Self.le($0) }))
    }
    mutating func f32Tensor(_ name: String, _ dims: [Int], _ values: [Float]) {
        tensors.append((name, dims.map(UInt64.init), 0, values.flatMap { Self.le($0.bitPattern) }))
    }

    /// The file; `alignment` 32, tensors in insertion order.
    func bytes() -> [UInt8] {
        var out = Array("GGUF".utf8) + Self.le(version) + Self.le(UInt64(tensors.count)) + Self.le(UInt64(metadata.count))
        for (key, type, value) in metadata { out += Self.str(key) + Self.le(type) + value }
        var offset: UInt64 = 0
        for t in tensors {
            out += Self.str(t.name) + Self.le(UInt32(t.dims.count)) + t.dims.flatMap { Self.le($0) } + Self.le(t.type) + Self.le(offset)
            offset += UInt64((t.data.count + 31) / 32 * 32)
        }
        for t in tensors {
            out += [UInt8](repeating: 0, count: (32 - out.count % 32) % 32)
            out += t.data
        }
        return out
    }

    /// A complete one-layer llama model (dim 8, 2 heads, hidden 8, vocab 4, context 16), every
    /// weight `index · 0.001` in file order, and no tokenizer.
    static func smallModel() -> HandGGUF {
        var g = HandGGUF()
        g.string("general.architecture", "llama")
        for (key, value) in [("llama.embedding_length", 8), ("llama.feed_forward_length", 8), ("llama.block_count", 1),
                             ("llama.attention.head_count", 2), ("llama.attention.head_count_kv", 2), ("llama.context_length", 16)] {
            g.u32(key, UInt32(value))
        }
        g.f32("llama.rope.freq_base", 10000)
        var counter = 0
        func next(_ n: Int) -> [Float] { defer { counter += n }; return (0 ..< n).map { Float(counter + $0) * 0.001 } }
        g.f32Tensor("token_embd.weight", [8, 4], next(32))
        for name in ["attn_norm", "ffn_norm"] { g.f32Tensor("blk.0.\(name).weight", [8], next(8)) }
        for name in ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"] {
            g.f32Tensor("blk.0.\(name).weight", [8, 8], next(64))
        }
        g.f32Tensor("output_norm.weight", [8], next(8))
        return g
    }

    func data() -> Data { Data(bytes()) }
}

struct GGUFTests {
    static func values(_ m: Matrix) -> [Float] { (0 ..< m.rows).flatMap { r in (0 ..< m.cols).map { m[r, $0] } } }

    static func allMatrices(_ w: ModelWeights) -> [Matrix] {
        [w.tokenEmbedding.floatMatrix(), w.finalNorm, w.classifier.floatMatrix()]
            + w.layers.flatMap { [$0.attentionNorm, $0.qkv.floatMatrix(), $0.wo.floatMatrix(), $0.ffnNorm,
                                  $0.gateUp.floatMatrix(), $0.down.floatMatrix()] }
    }

    static func loadError(_ data: Data) -> GGUFError? {
        do {
            _ = try ModelWeights.gguf(data: data)
            return nil
        } catch let ModelLoadError.gguf(_, error) {
            return error
        } catch {
            Issue.record("expected a GGUF error, got \(error)")
            return nil
        }
    }

    @Test func gguf_readsAHandWrittenFileIntoTheRightWeights() throws {
        let w = try ModelWeights.gguf(data: HandGGUF.smallModel().data(), path: "/x/hand.gguf")
        #expect(w.config.dim == 8 && w.config.hiddenDim == 8 && w.config.layerCount == 1 && w.config.vocabSize == 4)
        #expect(w.config.contextLength == 16 && w.config.sharedClassifier && w.config.name == "hand")
        #expect(w.config.weights == .gguf(path: "/x/hand.gguf"))
        func at(_ i: Int) -> Float { Float(i) * 0.001 }
        #expect(w.tokenEmbedding[1, 2] == at(8 + 2))             // row 1 of [vocab, dim], file order
        #expect(w.layers[0].attentionNorm[0, 3] == at(32 + 3))
        #expect(w.layers[0].ffnNorm[0, 0] == at(40))
        #expect(w.layers[0].wq[2, 5] == at(48 + 2 * 8 + 5))      // GGML [cols, rows]: row-major [rows][cols]
        #expect(w.layers[0].wk[0, 0] == at(112))
        #expect(w.layers[0].wv[7, 7] == at(176 + 63))
        #expect(w.layers[0].wo[1, 0] == at(240 + 8))
        #expect(w.layers[0].gateUp[0, 1] == at(304 + 1))          // gate: the first rows
        #expect(w.layers[0].gateUp[8, 1] == at(368 + 1))          // up: the rows after the gate
        #expect(w.layers[0].down[3, 3] == at(432 + 27))
        #expect(w.finalNorm[0, 7] == at(496 + 7))
        #expect(w.classifier[3, 0] == w.tokenEmbedding[3, 0])
    }

    @Test func gguf_decodesF16AndQ8_0TensorsWrittenByHand() throws {
        var g = HandGGUF.smallModel()
        // attn_q as F16: every weight 1.5 (0x3E00) except the first, -0.25 (0xB400).
        let q = g.tensors.firstIndex { $0.name == "blk.0.attn_q.weight" }!
        g.tensors[q].type = 1
        g.tensors[q].data = HandGGUF.le(UInt16(0xB400)) + (1 ..< 64).flatMap { _ in HandGGUF.le(UInt16(0x3E00)) }
        let w = try ModelWeights.gguf(data: g.data())
        #expect(w.layers[0].wq[0, 0] == -0.25 && w.layers[0].wq[0, 1] == 1.5 && w.layers[0].wq[7, 7] == 1.5)

        // Q8_0 rows are whole 32-weight blocks, so a model of dim 32: one block per row,
        // scale 0.5 (0x3800), q = row·10 + column - 64 (wrapping into Int8).
        var wide = HandGGUF()
        wide.string("general.architecture", "llama")
        for (key, value) in [("llama.embedding_length", 32), ("llama.feed_forward_length", 32), ("llama.block_count", 1),
                             ("llama.attention.head_count", 4), ("llama.context_length", 8)] {
            wide.u32(key, UInt32(value))
        }
        wide.f32Tensor("token_embd.weight", [32, 2], [Float](repeating: 0.5, count: 64))
        for name in ["attn_norm", "ffn_norm"] { wide.f32Tensor("blk.0.\(name).weight", [32], [Float](repeating: 1, count: 32)) }
        func q8(_ r: Int, _ c: Int) -> Int8 { Int8(truncatingIfNeeded: r * 10 + c - 64) }
        let block = (0 ..< 32).flatMap { r in HandGGUF.le(UInt16(0x3800)) + (0 ..< 32).map { UInt8(bitPattern: q8(r, $0)) } }
        for name in ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"] {
            wide.tensors.append(("blk.0.\(name).weight", [32, 32], 8, block))
        }
        wide.f32Tensor("output_norm.weight", [32], [Float](repeating: 1, count: 32))
        let v = try ModelWeights.gguf(data: wide.data())
        #expect(v.config.kvHeadCount == 4)   // head_count_kv defaults to head_count
        for (r, c) in [(0, 0), (3, 17), (31, 31), (12, 5)] {
            #expect(v.layers[0].down[r, c] == 0.5 * Float(q8(r, c)))
            #expect(v.layers[0].gateUp[32 + r, c] == 0.5 * Float(q8(r, c)))
        }
    }

    @Test func gguf_writerRoundTripsEveryWeightExactlyInF32() throws {
        for shared in [true, false] {
            let config = Fixtures.tinyConfig(sharedClassifier: shared)
            let original = Fixtures.tinyWeights(config)
            let loaded = try ModelWeights.gguf(data: original.ggufData())
            #expect(loaded.config.sharedClassifier == shared)
            var expected = config
            expected.weights = loaded.config.weights
            #expect(loaded.config == expected)
            for (a, b) in zip(Self.allMatrices(original), Self.allMatrices(loaded)) {
                #expect(Self.values(a).map(\.bitPattern) == Self.values(b).map(\.bitPattern))
            }
            let tokens = Fixtures.tokens(count: 12, vocabSize: config.vocabSize, seed: 3)
            let m1 = Transformer(weights: original), m2 = Transformer(weights: loaded)
            let l1 = try m1.forward(tokens, cache: m1.makeCache()).toArray()
            let l2 = try m2.forward(tokens, cache: m2.makeCache()).toArray()
            #expect(l1.map(\.bitPattern) == l2.map(\.bitPattern))
        }
    }

    @Test func gguf_f16AndQ8_0StayWithinOneQuantumOfEachWeight() throws {
        let config = Fixtures.tinyConfig(dim: 64)   // hidden 192: every row a whole number of Q8_0 blocks
        let original = Fixtures.tinyWeights(config)
        for type in [GGUFTensorType.f16, .q8_0] {
            let data = try original.ggufData(tensorType: type)
            let file = try GGUFFile(data: data)
            #expect(file.tensor(named: "blk.0.attn_q.weight")?.type == type)
            #expect(file.tensor(named: "blk.0.attn_norm.weight")?.type == .f32)   // norms stay exact
            let loaded = try ModelWeights.gguf(data: data)
            for (a, b) in zip(Self.allMatrices(original), Self.allMatrices(loaded)) {
                for r in 0 ..< a.rows {
                    let row = (0 ..< a.cols).map { a[r, $0] }
                    for c in 0 ..< a.cols {
                        let x = row[c], y = b[r, c]
                        let bound: Float = switch type {
                        case .f16: abs(x) * 0x1p-11 + 0x1p-25
                        // One step of the block's scale, plus the scale's own half rounding.
                        default: (row[c / 32 * 32 ..< c / 32 * 32 + 32].map(abs).max()! / 127) * (0.5 + 127 * 0x1p-11) + 0x1p-24
                        }
                        #expect(abs(x - y) <= bound, "\(type) [\(r), \(c)]: \(x) vs \(y)")
                        if abs(x - y) > bound { return }
                    }
                }
            }
        }
        // A matrix whose rows are not whole Q8_0 blocks is written as F16 instead.
        let oddFile = try GGUFFile(data: try ModelWeights.synthetic(
            ModelConfig(name: "odd", dim: 32, hiddenDim: 40, layerCount: 1, headCount: 4, kvHeadCount: 2, vocabSize: 300,
                        contextLength: 16), seed: 1).ggufData(tensorType: .q8_0))
        #expect(oddFile.tensor(named: "blk.0.ffn_down.weight")?.type == .f16)
        #expect(oddFile.tensor(named: "blk.0.ffn_up.weight")?.type == .q8_0)
    }

    /// Q8_0 stores each block's scale (its largest magnitude over 127) as a half, so a block
    /// holding 8,321,040 (65,520 × 127) or more would read back infinite or NaN: the range check
    /// refuses it, names the tensor, counts blocks, and passes the largest magnitude below the edge,
    /// which writes and reads back finite. Rows written as F16 instead follow the half rule.
    @Test func checkRange_refusesQ8_0BlocksWhoseScaleWouldBeInfinite() throws {
        let config = Fixtures.tinyConfig(dim: 64)   // every row whole Q8_0 blocks
        let edge: Float = 8_321_040
        let below = Fixtures.tinyWeights(config)
        HalfPrecisionTests.poison(below.layers[1].wk, row: 0, col: 33, -edge.nextDown)
        try below.checkRange(for: .q8_0)
        try below.checkRange(for: .f32)
        #expect(throws: ModelLoadError.beyondHalfRange(tensor: "blk.1.attn_k.weight", count: 1, largest: edge.nextDown)) {
            try below.checkRange(for: .f16)
        }
        let written = try ModelWeights.gguf(data: below.ggufData(tensorType: .q8_0))
        #expect(written.layers[1].wk[0, 33] == -65504 * 127)   // the scale rounds down to the largest half

        let beyond = Fixtures.tinyWeights(config)
        HalfPrecisionTests.poison(beyond.layers[1].wk, row: 0, col: 33, -edge)   // a tie: the scale rounds to infinity
        HalfPrecisionTests.poison(beyond.layers[1].wk, row: 2, col: 0, 9e6)
        HalfPrecisionTests.poison(beyond.layers[1].wk, row: 2, col: 1, 1e7)   // the same block as 9e6
        let expected = ModelLoadError.beyondQ8_0Range(tensor: "blk.1.attn_k.weight", blocks: 2, largest: 1e7)
        #expect(throws: expected) { try beyond.checkRange(for: .q8_0) }
        #expect(expected.description.contains("2 Q8_0 blocks of blk.1.attn_k.weight"), "\(expected)")
        #expect(beyond.layers[1].wk[0, 33] == -edge && beyond.layers[1].wk[2, 0] == 9e6)   // untouched
        // What the check prevents: written anyway, the block's weights come back infinite.
        let unchecked = try ModelWeights.gguf(data: beyond.ggufData(tensorType: .q8_0))
        #expect(!unchecked.layers[1].wk[0, 33].isFinite && !unchecked.layers[1].wk[0, 32].isFinite)

        // An infinity or NaN in a block (first, where it would lead a running maximum) does not
        // hide a finite weight beyond the range beside it.
        let poisoned = Fixtures.tinyWeights(config)
        HalfPrecisionTests.poison(poisoned.layers[0].wv, row: 3, col: 32, .nan)
        HalfPrecisionTests.poison(poisoned.layers[0].wv, row: 3, col: 40, 2e7)
        HalfPrecisionTests.poison(poisoned.layers[0].wv, row: 4, col: 0, .infinity)
        #expect(throws: ModelLoadError.beyondQ8_0Range(tensor: "blk.0.attn_v.weight", blocks: 1, largest: 2e7)) {
            try poisoned.checkRange(for: .q8_0)
        }

        let odd = try ModelWeights.synthetic(
            ModelConfig(name: "odd", dim: 32, hiddenDim: 40, layerCount: 1, headCount: 4, kvHeadCount: 2, vocabSize: 300,
                        contextLength: 16), seed: 1)
        HalfPrecisionTests.poison(odd.layers[0].down, row: 3, col: 5, 70000)   // rows of 40: written as F16
        #expect(throws: ModelLoadError.beyondHalfRange(tensor: "blk.0.ffn_down.weight", count: 1, largest: 70000)) {
            try odd.checkRange(for: .q8_0)
        }
        try Fixtures.tinyWeights(config).converted(to: .f16).checkRange(for: .q8_0)   // halfs always fit
    }

    /// A Q8_0 block holding a NaN or an infinity reads back all NaN, wherever in the block it sits
    /// (a NaN after the block's head once came back as a finite 127 · d); other blocks are untouched.
    @Test func ggufData_q8_0BlockWithANonFiniteWeightReadsBackNaN() throws {
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(dim: 64))
        HalfPrecisionTests.poison(weights.layers[0].wq, row: 2, col: 5, .nan)
        HalfPrecisionTests.poison(weights.layers[0].wq, row: 2, col: 63, -.infinity)
        let back = try ModelWeights.gguf(data: weights.ggufData(tensorType: .q8_0))
        let read = back.layers[0].wq
        #expect((0 ..< 64).allSatisfy { read[2, $0].isNaN })
        #expect((0 ..< 64).allSatisfy { read[1, $0].isFinite && read[3, $0].isFinite })
    }

    @Test func halfConversion_agreesWithFloat16() {
        #if !(os(macOS) && arch(x86_64))
        for bits in 0 ... UInt16.max {
            let expected = Float(Float16(bitPattern: bits))
            let got = Kernels.float(fromHalf: bits)
            #expect(got.bitPattern == expected.bitPattern || (got.isNaN && expected.isNaN), "half \(bits)")
            if !(got.bitPattern == expected.bitPattern || (got.isNaN && expected.isNaN)) { return }
        }
        var rng = SeededGenerator(seed: 5)
        let edges: [Float] = [0, -0, 65504, 65519.996, 65520, 1e-8, 0x1p-24, 0x1p-25, 0x1.8p-25, 0x1p-26, 5.9604645e-8,
                              .infinity, -.infinity, .greatestFiniteMagnitude, 1 + 0x1p-11, 1 + 0x1.8p-11, 0.1, -2.5]
        let randoms = (0 ..< 50_000).map { _ in Float(bitPattern: UInt32(truncatingIfNeeded: rng.next())) }.filter { !$0.isNaN }
        for x in edges + randoms {
            let expected = Float16(x).bitPattern
            #expect(Kernels.halfBits(x) == expected, "\(x)")
            if Kernels.halfBits(x) != expected { return }
        }
        #expect(Kernels.float(fromHalf: Kernels.halfBits(.nan)).isNaN)
        #endif
    }

    @Test func tokenizer_roundTripsThroughGGUFMetadata() throws {
        let tokenizer = Fixtures.bundledTokenizer
        let data = try Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: tokenizer.vocabSize)).ggufData(tokenizer: tokenizer)
        let file = try GGUFFile(data: data)
        let texts = try #require(file.metadata["tokenizer.ggml.tokens"]?.arrayValue).compactMap(\.stringValue)
        #expect(texts.count == tokenizer.vocabSize && !texts.contains { $0.contains(" ") } && texts.contains { $0.hasPrefix("▁") })
        let back = try Tokenizer(gguf: file)
        #expect(back.pieces == tokenizer.pieces)
        #expect(back.scores == tokenizer.scores)
        #expect(back.serialized() == tokenizer.serialized())
        // Token types: unknown, control (BOS, EOS and the session's control pieces), byte, normal.
        let types = try #require(file.metadata["tokenizer.ggml.token_type"]?.arrayValue).map(\.intValue)
        #expect(types[0] == 2 && types[1] == 3 && types[2] == 3 && types[3] == 6 && types[258] == 6)
        #expect(types[tokenizer.id(of: ControlPieces.user)!] == 3 && types.last == 1)
    }

    /// `tokenizer.chat_template` is kept as text and written back, for either kind of vocabulary;
    /// a file without one has none; one that is not a string is a typed error naming the key.
    @Test func tokenizer_keepsTheFilesChatTemplateAndWritesItBack() throws {
        let template = "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
        for var tokenizer in [Fixtures.bundledTokenizer, try Tokenizer(ggufAt: Fixtures.toolTagsVocabulary)] {
            let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: tokenizer.vocabSize))
            #expect(tokenizer.chatTemplate == nil)
            #expect(try GGUFFile(data: weights.ggufData(tokenizer: tokenizer)).metadata["tokenizer.chat_template"] == nil)
            tokenizer.chatTemplate = template
            let back = try Tokenizer(gguf: GGUFFile(data: weights.ggufData(tokenizer: tokenizer)))
            #expect(back.chatTemplate == template && back.identity == tokenizer.identity)
        }
        var file = HandGGUF()
        file.string("tokenizer.ggml.model", "llama")
        file.strings("tokenizer.ggml.tokens", ["<unk>", "<s>", "</s>"] + (0 ..< 256).map { String(format: "<0x%02X>", $0) })
        #expect(try Tokenizer(gguf: GGUFFile(data: file.data())).chatTemplate == nil)
        file.u32("tokenizer.chat_template", 7)
        #expect(throws: GGUFError.self) { try Tokenizer(gguf: GGUFFile(data: file.data())) }
        do { _ = try Tokenizer(gguf: GGUFFile(data: file.data())) } catch { #expect("\(error)".contains("tokenizer.chat_template")) }
    }

    /// Mistral's v3 vocabularies put control tokens (`[INST]`, the tool tokens, `[control_N]`)
    /// between EOS and the byte pieces: they are read as control tokens, byte fallback takes the
    /// pieces where they stand, and text encodes as llama2.c's loop does over the same pieces.
    @Test func tokenizer_readsAMistralV3LayoutWithControlTokensBeforeTheBytePieces() throws {
        let mistral = try Tokenizer(ggufAt: Fixtures.mistralV3Vocabulary)
        let bundled = Fixtures.bundledTokenizer
        let shift = mistral.vocabSize - bundled.vocabSize
        #expect(shift == 15 && mistral.byteTokenBase == 18 && bundled.byteTokenBase == Tokenizer.byteOffset)
        for piece in ["[INST]", "[/INST]", "[TOOL_CALLS]", "[/TOOL_RESULTS]", "[control_15]", "[control_21]"] {
            #expect(mistral.id(of: piece).map(mistral.controlTokens.contains) == true, "\(piece)")
        }
        #expect(mistral.controlTokens.count == 3 + 15 + ControlPieces.all.count)
        #expect(!mistral.fitsTokenizerBin && bundled.fitsTokenizerBin)
        #expect(mistral.chatTemplate?.contains("[INST]") == true)
        for text in Fixtures.trickyTexts + [Fixtures.heldOutEnglish, "🙂 [INST] x [/INST]"] {
            let ids = mistral.encode(text)
            #expect(ids == bundled.encode(text).map { $0 < 3 ? $0 : $0 + shift }, "\(text)")
            #expect(ids == referenceEncode(text, with: mistral))
            #expect(mistral.decode(ids) == bundled.decode(bundled.encode(text)))
            #expect(!ids.dropFirst().contains(where: mistral.controlTokens.contains))
        }
        // An emoji the vocabulary has no piece for: its four bytes' pieces, from `<0x00>` at 18.
        #expect(mistral.encode("🙂", bos: false).suffix(4) == Array("🙂".utf8).map { 18 + Int($0) })
        // Written into a model file and read back: the same vocabulary, control tokens and template.
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: mistral.vocabSize))
        let back = try Tokenizer(gguf: GGUFFile(data: weights.ggufData(tokenizer: mistral)))
        #expect(back.identity == mistral.identity && back.controlTokens == mistral.controlTokens && back.chatTemplate == mistral.chatTemplate)
        #expect(back.encode(Fixtures.heldOutEnglish) == mistral.encode(Fixtures.heldOutEnglish))
        // The bundled vocabulary through a GGUF file still fits llama2.c's tokenizer.bin.
        let bundledBack = try Tokenizer(gguf: GGUFFile(data: Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: bundled.vocabSize)).ggufData(tokenizer: bundled)))
        #expect(bundledBack.fitsTokenizerBin)
        // Byte pieces must still run `<0x00>` ... `<0xFF>` in order wherever they start.
        var file = HandGGUF()
        file.string("tokenizer.ggml.model", "llama")
        var tokens = ["<unk>", "<s>", "</s>", "[INST]"] + (0 ..< 256).map { String(format: "<0x%02X>", $0) }
        tokens.swapAt(4 + 0x41, 4 + 0x42)
        file.strings("tokenizer.ggml.tokens", tokens)
        do { _ = try Tokenizer(gguf: GGUFFile(data: file.data())); Issue.record("accepted byte pieces out of order") } catch {
            #expect("\(error)".contains("token \(4 + 0x41) should be the byte piece <0x41>"), "\(error)")
        }
    }

    @Test func ggufFile_parsedOnceGivesTheWeightsAndTheVocabularyTheFileDoes() throws {
        let tokenizer = Fixtures.bundledTokenizer
        let url = Fixtures.temporaryFile("parsed-once.gguf")
        defer { try? FileManager.default.removeItem(at: url) }
        try Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: tokenizer.vocabSize)).ggufData(tokenizer: tokenizer).write(to: url)
        let file = try GGUFFile(contentsOf: url)
        let weights = try ModelWeights.gguf(file, path: url.path), separately = try ModelWeights.gguf(at: url)
        #expect(weights.config == separately.config && ModelFingerprint(weights) == ModelFingerprint(separately))
        #expect(try Tokenizer(gguf: file, path: url.path).serialized() == Tokenizer(ggufAt: url).serialized())
        // Errors name the file.
        let missing = Fixtures.temporaryFile("absent.gguf")
        #expect(throws: ModelLoadError.self) { try GGUFFile(contentsOf: missing) }
        try Data("GGUF\u{2}\0\0\0".utf8).write(to: url)
        #expect(throws: ModelLoadError.gguf(path: url.path, .unsupportedVersion(2))) { try GGUFFile(contentsOf: url) }
        var bert = HandGGUF()
        bert.string("tokenizer.ggml.model", "bert")
        #expect(throws: ModelLoadError.gguf(path: "v.gguf", .unsupportedVocabulary("tokenizer.ggml.model is 'bert'; SentencePiece-style 'llama' and byte-level 'gpt2' vocabularies are read"))) {
            try Tokenizer(gguf: GGUFFile(data: bert.data()), path: "v.gguf")
        }
    }

    @Test func tokenizer_refusesVocabulariesItCannotEncodeWith() throws {
        func vocabulary(_ edit: (inout HandGGUF) -> Void) -> GGUFError? {
            var g = HandGGUF()
            g.string("tokenizer.ggml.model", "llama")
            g.strings("tokenizer.ggml.tokens", ["<unk>", "<s>", "</s>"] + (0 ..< 256).map { String(format: "<0x%02X>", $0) } + ["▁the"])
            edit(&g)
            do {
                _ = try Tokenizer(gguf: GGUFFile(data: g.data()))
                return nil
            } catch { return error }
        }
        #expect(vocabulary { _ in } == nil)
        #expect(vocabulary { $0.metadata[0].2 = HandGGUF.str("t5") } == .unsupportedVocabulary(
            "tokenizer.ggml.model is 't5'; SentencePiece-style 'llama' and byte-level 'gpt2' vocabularies are read"))
        #expect(vocabulary { $0.metadata[0].2 = HandGGUF.str("gpt2") } == .unsupportedVocabulary(
            "a byte-level vocabulary without tokenizer.ggml.pre (how it splits text into words)"))
        #expect(vocabulary { $0.u32("tokenizer.ggml.bos_token_id", 5) } == .unsupportedVocabulary(
            "tokenizer.ggml.bos_token_id is 5; this tokenizer needs 1"))
        #expect(vocabulary { $0.floats("tokenizer.ggml.scores", [1, 2]) }.map { "\($0)".contains("2 scores for 260 tokens") } == true)
        #expect(vocabulary { $0.metadata.removeAll() } == .missingKey("tokenizer.ggml.model"))
        #expect(vocabulary { $0.ints("tokenizer.ggml.token_type", [Int32](repeating: 1, count: 260)) } == nil)
        if case let .invalidField(field, _, _)? = vocabulary({ $0.ints("tokenizer.ggml.token_type", [1, 2]) }) {
            #expect(field == "tokenizer.ggml.token_type")
        } else { Issue.record("token types that do not match the tokens must be refused") }
        if case .invalidField? = vocabulary({ $0.ints("tokenizer.ggml.token_type", [Int32](repeating: 9, count: 260)) }) {}
        else { Issue.record("an unknown token type must be refused") }
        if case .unsupportedVocabulary = vocabulary({ g in
            g.metadata[1] = ("tokenizer.ggml.tokens", 9, HandGGUF.le(UInt32(8)) + HandGGUF.le(UInt64(3)) + ["a", "b", "c"].flatMap(HandGGUF.str))
        }) {} else { Issue.record("a vocabulary without byte pieces must be refused") }
    }

    @Test func gguf_malformedFilesGetTypedErrorsNamingTheFieldAndOffset() {
        let good = HandGGUF.smallModel()
        #expect(Self.loadError(good.data()) == nil)
        var bytes = good.bytes()
        bytes[0] = UInt8(ascii: "X")
        #expect(Self.loadError(Data(bytes)) == .badMagic(found: Array("XGUF".utf8)))
        var v2 = good
        v2.version = 2
        #expect(Self.loadError(v2.data()) == .unsupportedVersion(2))
        var gpt = good
        gpt.metadata[0].2 = HandGGUF.str("gpt2")
        #expect(Self.loadError(gpt.data()) == .unsupportedArchitecture("gpt2"))
        var noHeads = good
        noHeads.metadata.removeAll { $0.0 == "llama.attention.head_count" }
        #expect(Self.loadError(noHeads.data()) == .missingKey("llama.attention.head_count"))
        var iq2 = good
        iq2.tensors[3].type = 16   // IQ2_XXS: read by llama.cpp, not here
        if case let .unsupportedTensorType(name, 16, offset)? = Self.loadError(iq2.data()) {
            #expect(name == iq2.tensors[3].name && offset > 24)
        } else { Issue.record("IQ2_XXS must be refused as an unsupported type") }
        var wrongShape = good
        wrongShape.tensors[4].dims = [4, 16]
        if case let .shapeMismatch(name, expected, found, _)? = Self.loadError(wrongShape.data()) {
            #expect(name == wrongShape.tensors[4].name && expected == [8, 8] && found == [4, 16])
        } else { Issue.record("a tensor of the wrong shape must be refused") }
        var missing = good
        missing.tensors.removeAll { $0.name == "blk.0.ffn_up.weight" }
        #expect(Self.loadError(missing.data()) == .missingTensor("blk.0.ffn_up.weight"))
        var stray = good
        stray.f32Tensor("blk.0.attn_output.bias", [4], [1, 1, 1, 1])   // an output-projection bias: not run here
        if case let .invalidField(field, _, _)? = Self.loadError(stray.data()) { #expect(field == "tensor blk.0.attn_output.bias") }
        else { Issue.record("an unknown tensor must be refused") }
        var duplicate = good
        duplicate.u32("llama.block_count", 1)
        if case let .invalidField(field, _, reason)? = Self.loadError(duplicate.data()) {
            #expect(field == "llama.block_count" && reason == "duplicate key")
        } else { Issue.record("a duplicate key must be refused") }
        var wrongType = good
        wrongType.string("llama.feed_forward_length", "eight")
        wrongType.metadata.removeAll { $0.0 == "llama.feed_forward_length" && $0.1 == 4 }
        if case let .invalidField(field, offset, _)? = Self.loadError(wrongType.data()) {
            #expect(field == "llama.feed_forward_length" && offset > 24)
        } else { Issue.record("a string where an integer belongs must be refused") }
        // Counts larger than the file could hold are refused before anything is allocated.
        var huge = good.bytes()
        huge.replaceSubrange(8 ..< 16, with: HandGGUF.le(UInt64(1) << 60))
        if case let .invalidField(field, 8, _)? = Self.loadError(Data(huge)) { #expect(field == "tensor count") }
        else { Issue.record("an impossible tensor count must be refused") }
        // Tensor data cut short.
        let full = good.bytes()
        if case let .truncatedTensorData(name, _, count, fileBytes)? = Self.loadError(Data(full.dropLast(10))) {
            #expect(name == "output_norm.weight" && count == 32 && fileBytes == full.count - 10)
        } else { Issue.record("truncated tensor data must be refused") }
    }

    @Test func gguf_everyPrefixOfAFileFailsCleanly() {
        let bytes = HandGGUF.smallModel().bytes()
        for length in 0 ..< bytes.count {
            do {
                _ = try ModelWeights.gguf(data: Data(bytes[..<length]))
                Issue.record("a \(length)-byte prefix loaded")
            } catch ModelLoadError.gguf {
            } catch {
                Issue.record("prefix \(length): \(error)")
            }
        }
    }

    // MARK: The llama2.c reference model through GGUF

    static let reference: (model: URL, tokenizer: URL, cases: URL)? = {
        guard let m = Fixtures.sharedModel("stories260K.bin"), let t = Fixtures.sharedModel("tok512.bin"),
              let r = Fixtures.sharedModel("reference-greedy.json") else { return nil }
        return (m, t, r)
    }()

    struct Case: Decodable {
        let prompt_token_ids: [Int]
        let generated_token_ids: [Int]
    }

    struct Reference: Decodable { let cases: [Case] }

    @Test(.enabled(if: reference != nil, "skipped: ../shared/models/{stories260K.bin,tok512.bin,reference-greedy.json} are absent"))
    func gguf_stories260KAsGGUFGivesLlama2csGreedyTokensAndBack() throws {
        let files = try #require(Self.reference)
        let weights = try ModelWeights.checkpoint(at: files.model)
        let tokenizer = try Tokenizer(contentsOf: files.tokenizer, vocabSize: 512)
        let ggufURL = Fixtures.temporaryFile("stories260K.gguf")
        defer { try? FileManager.default.removeItem(at: ggufURL) }
        try weights.ggufData(tokenizer: tokenizer).write(to: ggufURL)
        let loaded = try ModelWeights.gguf(at: ggufURL)
        let ggufTokenizer = try Tokenizer(ggufAt: ggufURL)
        #expect(ggufTokenizer.serialized() == (try Data(contentsOf: files.tokenizer)))
        let cases = try JSONDecoder().decode(Reference.self, from: Data(contentsOf: files.cases)).cases
        // And back: GGUF → llama2.c checkpoint.
        let backURL = Fixtures.temporaryFile("stories260K.bin")
        defer { try? FileManager.default.removeItem(at: backURL) }
        try loaded.checkpointData().write(to: backURL)
        for model in [Transformer(weights: loaded), Transformer(weights: try ModelWeights.checkpoint(at: backURL))] {
            for c in cases {
                var sampler = try Sampler(.greedy)
                let out = try model.generate(prompt: c.prompt_token_ids, maxNewTokens: 256 - c.prompt_token_ids.count + 1,
                                             sampler: &sampler, cache: model.makeCache())
                #expect(out.generatedTokens == c.generated_token_ids)
            }
        }
    }
}
