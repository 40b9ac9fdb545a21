import Foundation
import LMRuntime

/// Shared fixtures for the test targets: reference files, small seeded models, comparisons.
public enum Fixtures {
    /// The package root (found from this file's location).
    public static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0 ..< 3 { url.deleteLastPathComponent() }   // Tests/LMTestSupport/Fixtures.swift
        return url
    }()

    /// `../shared/models` beside the checkout, where the reference checkpoint lives.
    public static let sharedModels = packageRoot.deletingLastPathComponent().appendingPathComponent("shared/models")

    /// A file in `../shared/models`, or `nil` (with the reason) when it is absent.
    public static func sharedModel(_ name: String) -> URL? {
        let url = sharedModels.appendingPathComponent(name)
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }

    /// A small model for fast tests: 2 layers, grouped-query attention (4 heads over 2 KV heads).
    public static func tinyConfig(vocabSize: Int = 300, contextLength: Int = 96, dim: Int = 32,
                                  layerCount: Int = 2, sharedClassifier: Bool = true,
                                  weightPrecision: WeightPrecision = .f32) -> ModelConfig {
        ModelConfig(name: "test-tiny", dim: dim, hiddenDim: 3 * dim, layerCount: layerCount, headCount: 4,
                    kvHeadCount: 2, vocabSize: vocabSize, contextLength: contextLength,
                    sharedClassifier: sharedClassifier, weights: .synthetic(seed: 7), weightPrecision: weightPrecision)
    }

    /// Seeded weights for ``tinyConfig(vocabSize:contextLength:dim:layerCount:sharedClassifier:weightPrecision:)``.
    public static func tinyWeights(_ config: ModelConfig = tinyConfig(), seed: UInt64 = 7) -> ModelWeights {
        // The config is valid by construction; a failure here is a fixture bug.
        try! ModelWeights.synthetic(config, seed: seed)
    }

    /// Deterministic pseudo-random token ids in `0..<vocabSize`.
    public static func tokens(count: Int, vocabSize: Int, seed: UInt64) -> [Int] {
        var rng = SeededGenerator(seed: seed)
        return (0 ..< count).map { _ in Int(rng.next() % UInt64(vocabSize)) }
    }

    /// Largest `|a - b| / max(1, |b|)` over the elements.
    public static func maxRelativeError(_ a: [Float], _ b: [Float]) -> Float {
        precondition(a.count == b.count)
        return zip(a, b).map { abs($0 - $1) / max(1, abs($1)) }.max() ?? 0
    }
}

extension Fixtures {
    /// Texts that stress an encoder: empty, whitespace runs, punctuation, non-ASCII, emoji, long.
    public static let trickyTexts: [String] = [
        "", " ", "  ", "a", "Once upon a time", "  two leading spaces", "trailing spaces   ",
        "tabs\tand\nnewlines\n\n", "punctuation!?,.;:\"'()[]{}", "naïve café, Ωmega, 日本語, Привет",
        "emoji 🙂🚀👩‍👩‍👧 and flags 🇵🇹", "\u{0}\u{1}control\u{7F}", "numbers 1234567890 3.14159",
        String(repeating: "The quick brown fox jumps over the lazy dog. ", count: 40),
    ]

    /// The Qwen2 byte-level fixture vocabulary with Qwen2.5's tool tags (`<tool_call>`,
    /// `</tool_call>`, `<tool_response>`, `</tool_response>`) as user-defined tokens.
    public static let toolTagsVocabulary = packageRoot.appendingPathComponent("Tests/Fixtures/byte-level-bpe/qwen2-tool-tags.gguf")

    /// The same fixture vocabulary made a Llama 3.1 one: Llama 3's chat tokens, `<|python_tag|>` and
    /// `<|eom_id|>` as control tokens, the `llama-bpe` pre-tokenizer, BOS added.
    public static let pythonTagVocabulary = packageRoot.appendingPathComponent("Tests/Fixtures/byte-level-bpe/llama3-tool-tags.gguf")

    /// The bundled vocabulary laid out as Mistral's v3 vocabularies are (`[INST]`, `[/INST]`, the tool
    /// tokens and `[control_N]` as control tokens between EOS and the byte pieces, which start at 18),
    /// with a chat template in Mistral's form; a vocabulary-only GGUF (`Scripts/make-mistral-v3-fixture.py`).
    public static let mistralV3Vocabulary = packageRoot.appendingPathComponent("Tests/Fixtures/sentencepiece/mistral-v3-layout.gguf")

    /// The bundled `Models/` folder of this checkout.
    public static var bundledCatalog: ModelCatalog { ModelCatalog(directory: packageRoot.appendingPathComponent("Models")) }

    /// The bundled tokenizer (`Models/tokenizer.bin`).
    public static let bundledTokenizer: Tokenizer = {
        // Shipped in the repository; failing to load it is a broken checkout.
        try! Tokenizer(contentsOf: packageRoot.appendingPathComponent("Models/tokenizer.bin"))
    }()

    /// English text that is not part of the tokenizer's training corpus.
    public static let heldOutEnglish = """
        The assistant suggested a short evening walk, a light dinner with rice and vegetables, and an \
        early night before tomorrow's interval session. After the meeting, please send the updated \
        slides to the whole team and add a summary of the decisions we made about the spring release. \
        The weather should stay dry until the afternoon, when a little rain may arrive from the coast.
        """

    /// A temporary file path unique to this call (parallel tests never share one).
    public static func temporaryFile(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("kvsession-\(UUID().uuidString)-\(name)")
    }
}
