import Foundation

/// The model configs bundled in the package's `Models/` folder, and loading a model by name.
///
/// A config names its tokenizer and weight source relative to its own folder.
public struct ModelCatalog: Sendable {
    /// The folder holding `NAME.json` configs.
    public let directory: URL

    /// The `Models/` folder of this package's source tree (found from this file's
    /// location, so it works in a checkout and as a dependency), or the folder
    /// named by the `KVSESSION_MODELS` environment variable.
    public static var bundled: ModelCatalog {
        if let override = ProcessInfo.processInfo.environment["KVSESSION_MODELS"], !override.isEmpty {
            return ModelCatalog(directory: URL(fileURLWithPath: override))
        }
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0 ..< 4 { url.deleteLastPathComponent() }   // Sources/LMRuntime/Model/ModelCatalog.swift
        return ModelCatalog(directory: url.appendingPathComponent("Models"))
    }

    /// A catalog over `directory`.
    public init(directory: URL) { self.directory = directory }

    /// Names of the configs present, sorted.
    public var names: [String] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return files.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }

    /// Reads `NAME.json`.
    /// - Throws: ``ModelLoadError/unknownModel(name:available:)`` or ``ModelLoadError/invalidConfig(path:reason:)``.
    public func config(named name: String) throws -> ModelConfig {
        let url = directory.appendingPathComponent("\(name).json")
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw ModelLoadError.unknownModel(name: name, available: names)
        }
        return try Self.config(at: url)
    }

    /// Reads and validates a config file.
    /// - Throws: ``ModelLoadError/invalidConfig(path:reason:)`` for bad JSON or impossible sizes.
    public static func config(at url: URL) throws -> ModelConfig {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw ModelLoadError.unreadable(path: url.path, reason: error.localizedDescription)
        }
        let config: ModelConfig
        do { config = try JSONDecoder().decode(ModelConfig.self, from: data) } catch {
            throw ModelLoadError.invalidConfig(path: url.path, reason: Self.explain(error))
        }
        do { try config.validate() } catch let ModelLoadError.invalidDimensions(reason) {
            throw ModelLoadError.invalidConfig(path: url.path, reason: reason)
        }
        return config
    }

    /// Builds the weights a config describes (synthetic, checkpoint or GGUF) in its ``ModelConfig/weightPrecision``.
    /// A GGUF file's dimensions are its own; the config's ``ModelConfig/contextLength``, when
    /// shorter than the file's, limits the context (``ModelConfig/limitingContext(to:)``).
    public func weights(for config: ModelConfig) throws -> ModelWeights {
        switch config.weights {
        case let .synthetic(seed): return try .synthetic(config, seed: seed)
        case let .checkpoint(path): return try ModelWeights.checkpoint(at: resolve(path)).converted(to: config.weightPrecision)
        case let .gguf(path):
            return try ModelWeights.gguf(at: resolve(path), precision: config.weightPrecision, contextLength: config.contextLength)
        }
    }

    /// The weights and the tokenizer a config describes (``weights(for:)``, ``tokenizer(for:)``); a
    /// GGUF file that holds both is read and parsed once, which matters for a large vocabulary.
    /// - Throws: ``ModelLoadError``, as those two do.
    public func model(for config: ModelConfig) throws -> (weights: ModelWeights, tokenizer: Tokenizer) {
        guard config.tokenizer == nil, case let .gguf(path) = config.weights else {
            return (try weights(for: config), try tokenizer(for: config))
        }
        let url = resolve(path)
        let file = try GGUFFile(contentsOf: url)
        return (try ModelWeights.gguf(file, path: url.path, precision: config.weightPrecision, contextLength: config.contextLength),
                try Tokenizer(gguf: file, path: url.path))
    }

    /// Loads the tokenizer a config names (or, for GGUF weights without one, the file's own).
    /// - Throws: ``ModelLoadError`` when it is missing, corrupt, or its size differs from the model's vocabulary.
    public func tokenizer(for config: ModelConfig) throws -> Tokenizer {
        if config.tokenizer == nil, case let .gguf(path) = config.weights { return try Tokenizer(ggufAt: resolve(path)) }
        guard let file = config.tokenizer else {
            throw ModelLoadError.invalidConfig(path: config.name, reason: "the config names no tokenizer")
        }
        let tokenizer = try Tokenizer(contentsOf: resolve(file))
        guard tokenizer.vocabSize == config.vocabSize else {
            throw ModelLoadError.vocabularyMismatch(modelVocabSize: config.vocabSize, tokenizerVocabSize: tokenizer.vocabSize)
        }
        return tokenizer
    }

    /// A path from a config, resolved against ``directory`` unless absolute.
    public func resolve(_ path: String) -> URL {
        path.hasPrefix("/") ? URL(fileURLWithPath: path) : directory.appendingPathComponent(path)
    }

    private static func explain(_ error: any Error) -> String {
        switch error {
        case let DecodingError.keyNotFound(key, _): "missing field '\(key.stringValue)'"
        case let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context):
            "wrong type at '\(context.codingPath.map(\.stringValue).joined(separator: "."))': \(context.debugDescription)"
        case let DecodingError.dataCorrupted(context): "not valid JSON: \(context.debugDescription)"
        default: "\(error)"
        }
    }
}
