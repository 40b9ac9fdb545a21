extension Tokenizer {
    /// A byte-level (`gpt2`) vocabulary from GGUF metadata; see ``init(gguf:)``.
    ///
    /// Requires `tokenizer.ggml.pre` to name a supported pre-tokenizer, a token for each of the 256
    /// byte characters, `tokenizer.ggml.merges` whose every entry is two tokens separated by a
    /// space whose concatenation is a token too (as Hugging Face's loader requires), and BOS and
    /// EOS ids in range. Control tokens (type 3) and user-defined ones (type 4) stand for their
    /// own text; user-defined ones are read from text (before pre-tokenizing, as llama.cpp and
    /// Hugging Face do), control ones never.
    init(byteLevelGGUF file: GGUFFile) throws(GGUFError) {
        guard file.metadata["tokenizer.ggml.pre"] != nil else {
            throw .unsupportedVocabulary("a byte-level vocabulary without tokenizer.ggml.pre (how it splits text into words)")
        }
        let preName = try file.string("tokenizer.ggml.pre")
        guard let preTokenizer = PreTokenizer(ggufName: preName) else {
            throw .unsupportedVocabulary("tokenizer.ggml.pre is '\(preName)'; byte-level vocabularies are read with 'gpt-2', 'smollm', 'llama-bpe' or 'qwen2'")
        }
        let stored = try Self.storedTokens(file)
        let types = try Self.tokenTypes(file, count: stored.count) ?? [Int32](repeating: 1, count: stored.count)
        let literal = { (id: Int) in types[id] == 3 || types[id] == 4 }   // control and user-defined: their own text
        let pieces = stored.indices.map { literal($0) ? Array(stored[$0].utf8) : ByteLevelBPE.bytes(ofStored: stored[$0]) }

        var idOf: [String: Int] = [:]   // the tokens text can be made of
        idOf.reserveCapacity(stored.count)
        for (id, text) in stored.enumerated() where !literal(id) && idOf[text] == nil { idOf[text] = id }
        var byteTokens: [Int32] = []
        for byte in 0 ..< 256 {
            let character = String(ByteLevelBPE.alphabet[byte])
            guard let id = idOf[character] else {
                throw .unsupportedVocabulary("no token for byte 0x\(String(format: "%02X", byte)) ('\(character)'); a byte-level vocabulary needs all 256")
            }
            byteTokens.append(Int32(id))
        }

        guard let mergeValues = try file.array("tokenizer.ggml.merges") else { throw .missingKey("tokenizer.ggml.merges") }
        let mergesOffset = file.offset(of: "tokenizer.ggml.merges")
        var merges: [UInt64: (rank: Int32, merged: Int32)] = [:]
        merges.reserveCapacity(mergeValues.count)
        var storedMerges: [String] = []
        storedMerges.reserveCapacity(mergeValues.count)
        for (rank, value) in mergeValues.enumerated() {
            func invalid(_ reason: String) -> GGUFError {
                .invalidField(field: "tokenizer.ggml.merges", byteOffset: mergesOffset, reason: "entry \(rank) \(reason)")
            }
            guard let text = value.stringValue else { throw invalid("is not a string") }
            let utf8 = Array(text.utf8)
            // Split at the first space after the first byte, as llama.cpp does.
            guard let space = utf8.indices.dropFirst().first(where: { utf8[$0] == 0x20 }) else {
                throw invalid("('\(text)') is not two tokens separated by a space")
            }
            let left = String(decoding: utf8[..<space], as: UTF8.self), right = String(decoding: utf8[(space + 1)...], as: UTF8.self)
            guard let a = idOf[left], let b = idOf[right], let merged = idOf[left + right] else {
                throw invalid("('\(text)') joins pieces that are not both tokens, or makes one that is not")
            }
            let pair = Self.pair(a, b)
            if merges[pair] == nil { merges[pair] = (Int32(rank), Int32(merged)) }
            storedMerges.append(text)
        }

        func tokenID(_ key: String) throws(GGUFError) -> Int {
            guard file.metadata[key] != nil else { throw .missingKey(key) }
            let id = try file.integer(key)
            guard stored.indices.contains(id) else {
                throw .invalidField(field: key, byteOffset: file.offset(of: key), reason: "\(id) is not a token id (the vocabulary has \(stored.count))")
            }
            return id
        }
        let bos = try tokenID("tokenizer.ggml.bos_token_id"), eos = try tokenID("tokenizer.ggml.eos_token_id")
        var addsBOS = preTokenizer == .llama3   // llama.cpp's default for these pre-tokenizers
        if let flag = file.metadata["tokenizer.ggml.add_bos_token"] {
            guard case let .bool(value) = flag else {
                throw .invalidField(field: "tokenizer.ggml.add_bos_token", byteOffset: file.offset(of: "tokenizer.ggml.add_bos_token"), reason: "is not a boolean")
            }
            addsBOS = value
        }
        let userTokens = types.indices.filter { types[$0] == 4 }.map { (bytes: pieces[$0], id: $0) }
            .sorted { ($0.bytes.count, -$0.id) > ($1.bytes.count, -$1.id) }
        let bpe = ByteLevelBPE(preTokenizer: preTokenizer, merges: merges, byteTokens: byteTokens, storedTokens: stored,
                               storedMerges: storedMerges, tokenTypes: types, userTokens: userTokens)
        let control = Set(types.indices.filter { types[$0] == 3 }).union([bos, eos])
        self.init(byteLevel: bpe, pieces: pieces, bosToken: bos, eosToken: eos, addsBOS: addsBOS, controlTokens: control)
    }

    /// The words a byte-level vocabulary cuts `text` into, in order (merges never cross them;
    /// they join to `text`): each user-defined token's text, and the pre-tokenizer's words of
    /// the runs between them. In llama2.c's layout, which merges across the whole text, the text itself.
    public func words(_ text: String) -> [String] {
        guard let byteLevel else { return [text] }
        return byteLevel.splitAtUserTokens(Array(text.utf8)).flatMap { fragment -> [String] in
            let piece = String(decoding: fragment.bytes, as: UTF8.self)
            if fragment.id != nil { return [piece] }
            let scalars = Array(piece.unicodeScalars)
            return byteLevel.preTokenizer.words(scalars).map { String(String.UnicodeScalarView(scalars[$0])) }
        }
    }

    /// The `tokenizer.ggml.*` metadata of a byte-level vocabulary, as ``init(byteLevelGGUF:)`` reads it.
    func byteLevelMetadata(_ bpe: ByteLevelBPE) -> [(String, GGUFValue)] {
        [("tokenizer.ggml.model", .string("gpt2")), ("tokenizer.ggml.pre", .string(bpe.preTokenizer.ggufName)),
         ("tokenizer.ggml.tokens", .array(bpe.storedTokens.map(GGUFValue.string))),
         ("tokenizer.ggml.merges", .array(bpe.storedMerges.map(GGUFValue.string))),
         ("tokenizer.ggml.token_type", .array(bpe.tokenTypes.map(GGUFValue.int32))),
         ("tokenizer.ggml.bos_token_id", .uint32(UInt32(bosToken))), ("tokenizer.ggml.eos_token_id", .uint32(UInt32(eosToken))),
         ("tokenizer.ggml.add_bos_token", .bool(addsBOS))]
    }
}
