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
                                  layerCount: Int = 2, sharedClassifier: Bool = true) -> ModelConfig {
        ModelConfig(name: "test-tiny", dim: dim, hiddenDim: 3 * dim, layerCount: layerCount, headCount: 4,
                    kvHeadCount: 2, vocabSize: vocabSize, contextLength: contextLength,
                    sharedClassifier: sharedClassifier, weights: .synthetic(seed: 7))
    }

    /// Seeded weights for ``tinyConfig(vocabSize:contextLength:dim:layerCount:sharedClassifier:)``.
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
