import Foundation

extension Tokenizer {
    /// SentencePiece's visible space, which GGUF vocabularies use where llama2.c's use a space.
    static let sentencePieceSpace = "\u{2581}"

    /// The vocabulary stored in a GGUF file's `tokenizer.ggml.*` metadata.
    ///
    /// Two kinds are read:
    /// - `llama` (SentencePiece-style) vocabularies in llama2.c's layout: `<unk>` 0, BOS 1, EOS 2,
    ///   byte pieces `<0x00>`...`<0xFF>` at 3...258;
    /// - `gpt2` (byte-level BPE) vocabularies whose `tokenizer.ggml.pre` is `gpt-2`, `smollm`,
    ///   `llama-bpe` (Llama 3) or `qwen2`, with their ranked `tokenizer.ggml.merges`, BOS and EOS ids.
    /// - Throws: ``GGUFError/missingKey(_:)``, ``GGUFError/invalidField(field:byteOffset:reason:)`` for
    ///   malformed arrays, ``GGUFError/unsupportedVocabulary(_:)`` for another layout, model or pre-tokenizer.
    ///
    /// A `tokenizer.chat_template` string is kept as ``chatTemplate``.
    public init(gguf file: GGUFFile) throws(GGUFError) {
        let model = try file.string("tokenizer.ggml.model")
        if model == "gpt2" {
            try self.init(byteLevelGGUF: file)
        } else {
            try self.init(sentencePieceGGUF: file, model: model)
        }
        if file.metadata[Self.chatTemplateKey] != nil { chatTemplate = try file.string(Self.chatTemplateKey) }
    }

    /// Where a GGUF file keeps its chat template.
    static let chatTemplateKey = "tokenizer.chat_template"

    /// A `llama` (SentencePiece-style) vocabulary in llama2.c's layout; see ``init(gguf:)``.
    private init(sentencePieceGGUF file: GGUFFile, model: String) throws(GGUFError) {
        guard model == "llama" else {
            throw .unsupportedVocabulary("tokenizer.ggml.model is '\(model)'; SentencePiece-style 'llama' and byte-level 'gpt2' vocabularies are read")
        }
        let pieces = try Self.storedTokens(file).map { Array($0.replacingOccurrences(of: Self.sentencePieceSpace, with: " ").utf8) }
        var scores = [Float](repeating: 0, count: pieces.count)
        if let stored = try file.array("tokenizer.ggml.scores") {
            let offset = file.offset(of: "tokenizer.ggml.scores")
            guard stored.count == pieces.count else {
                throw .invalidField(field: "tokenizer.ggml.scores", byteOffset: offset, reason: "\(stored.count) scores for \(pieces.count) tokens")
            }
            for (i, value) in stored.enumerated() {
                guard let score = value.doubleValue, score.isFinite else {
                    throw .invalidField(field: "tokenizer.ggml.scores", byteOffset: offset, reason: "entry \(i) is not a finite number")
                }
                scores[i] = Float(score)
            }
        }
        let types = try Self.tokenTypes(file, count: pieces.count)
        for (key, expected) in [("tokenizer.ggml.unknown_token_id", Self.unknown), ("tokenizer.ggml.bos_token_id", Self.bos),
                                ("tokenizer.ggml.eos_token_id", Self.eos)] where file.metadata[key] != nil {
            let id = try file.integer(key)
            guard id == expected else { throw .unsupportedVocabulary("\(key) is \(id); this tokenizer needs \(expected)") }
        }
        // The 256 byte pieces in order, from `<0x00>` (at 3 in llama2.c's layout, after Mistral v3's control tokens at 771).
        let base = pieces.firstIndex { Self.byteValue($0[...]) == 0 } ?? Self.byteOffset
        guard pieces.count >= base + 256 else {
            throw .unsupportedVocabulary("\(pieces.count) tokens; the special and byte-fallback tokens need \(base + 256)")
        }
        for byte in 0 ..< 256 where Self.byteValue(pieces[base + byte][...]) != UInt8(byte) {
            throw .unsupportedVocabulary("token \(base + byte) should be the byte piece <0x\(String(format: "%02X", byte))>")
        }
        let control = types.map { types in Set(types.indices.filter { types[$0] == 3 }) } ?? []
        self.init(pieces: pieces, scores: scores, byteTokenBase: base, controlTokens: control)
    }

    /// `tokenizer.ggml.tokens`, every entry a string.
    static func storedTokens(_ file: GGUFFile) throws(GGUFError) -> [String] {
        guard let tokens = try file.array("tokenizer.ggml.tokens") else { throw .missingKey("tokenizer.ggml.tokens") }
        return try tokens.enumerated().map { i, value throws(GGUFError) -> String in
            guard let text = value.stringValue else {
                throw .invalidField(field: "tokenizer.ggml.tokens", byteOffset: file.offset(of: "tokenizer.ggml.tokens"), reason: "entry \(i) is not a string")
            }
            return text
        }
    }

    /// `tokenizer.ggml.token_type` if present: one type in 1...6 (normal, unknown, control,
    /// user-defined, unused, byte) per token.
    static func tokenTypes(_ file: GGUFFile, count: Int) throws(GGUFError) -> [Int32]? {
        guard let types = try file.array("tokenizer.ggml.token_type") else { return nil }
        let values = types.map { $0.intValue ?? 0 }
        guard values.count == count, values.allSatisfy((1 ... 6).contains) else {
            throw .invalidField(field: "tokenizer.ggml.token_type", byteOffset: file.offset(of: "tokenizer.ggml.token_type"),
                                reason: "needs one type in 1...6 per token (\(count))")
        }
        return values.map(Int32.init)
    }

    /// The vocabulary of the GGUF file at `url` (see ``init(gguf:)``).
    /// - Throws: ``ModelLoadError/unreadable(path:reason:)`` or ``ModelLoadError/gguf(path:_:)``.
    public init(ggufAt url: URL) throws {
        try self.init(gguf: GGUFFile(contentsOf: url), path: url.path)
    }

    /// The vocabulary of an already parsed GGUF file (see ``init(gguf:)``), its errors naming `path`.
    /// - Throws: ``ModelLoadError/gguf(path:_:)``.
    public init(gguf file: GGUFFile, path: String) throws(ModelLoadError) {
        do { try self.init(gguf: file) } catch { throw .gguf(path: path, error) }
    }

    /// The `tokenizer.*` metadata that ``init(gguf:)`` reads back: the vocabulary and any ``chatTemplate``.
    func ggufMetadata() -> [(String, GGUFValue)] {
        let template = chatTemplate.map { [(Self.chatTemplateKey, GGUFValue.string($0))] } ?? []
        return (byteLevel.map(byteLevelMetadata) ?? sentencePieceMetadata()) + template
    }

    /// The `tokenizer.ggml.*` metadata of a vocabulary in llama2.c's layout.
    private func sentencePieceMetadata() -> [(String, GGUFValue)] {
        let control = controlTokens.union(ControlPieces.all.compactMap(id(of:)))
        let types = pieces.indices.map { id -> GGUFValue in
            // SentencePiece token types: 1 normal, 2 unknown, 3 control, 6 byte.
            if id == Self.unknown { return .int32(2) }
            if control.contains(id) { return .int32(3) }
            if (byteTokenBase ..< byteTokenBase + 256).contains(id), Self.byteValue(pieces[id][...]) != nil { return .int32(6) }
            return .int32(1)
        }
        let text = pieces.map { GGUFValue.string(String(decoding: $0, as: UTF8.self).replacingOccurrences(of: " ", with: Self.sentencePieceSpace)) }
        return [("tokenizer.ggml.model", .string("llama")), ("tokenizer.ggml.tokens", .array(text)),
                ("tokenizer.ggml.scores", .array(scores.map(GGUFValue.float32))), ("tokenizer.ggml.token_type", .array(types)),
                ("tokenizer.ggml.unknown_token_id", .uint32(UInt32(Self.unknown))), ("tokenizer.ggml.bos_token_id", .uint32(UInt32(Self.bos))),
                ("tokenizer.ggml.eos_token_id", .uint32(UInt32(Self.eos)))]
    }
}
