import ArgumentParser
import Foundation
import LMRuntime

/// Options shared by the subcommands that run a model.
struct ModelOptions: ParsableArguments {
    @Option(name: .long, help: "Bundled model config to use (a name from Models/, e.g. tiny, small, base).")
    var model: String?

    @Option(name: .long, help: "A llama2.c checkpoint (.bin) to use instead of a bundled model.")
    var checkpoint: String?

    @Option(name: .long, help: "A llama2.c tokenizer.bin for --checkpoint.")
    var tokenizer: String?

    @Option(name: .long, help: "Threads the runtime splits its work over (default: one per core).")
    var threads: Int?

    func validate() throws {
        if model != nil, checkpoint != nil { throw ValidationError("Use either --model or --checkpoint, not both.") }
        if tokenizer != nil, checkpoint == nil { throw ValidationError("--tokenizer goes with --checkpoint.") }
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1, got \(threads).") }
    }

    /// Applies `--threads`.
    func configureThreads() {
        if let threads { LMRuntime.Kernels.threadCount = threads }
    }

    /// The weights named by the options (`fallback` when neither --model nor --checkpoint is given).
    func loadWeights(fallback: String) throws -> ModelWeights {
        if let checkpoint { return try ModelWeights.checkpoint(at: URL(fileURLWithPath: checkpoint)) }
        let catalog = ModelCatalog.bundled
        return try catalog.weights(for: catalog.config(named: model ?? fallback))
    }

    /// The tokenizer for `weights`: --tokenizer, or the one its bundled config names.
    func loadTokenizer(for weights: ModelWeights) throws -> LMRuntime.Tokenizer {
        if let tokenizer {
            return try LMRuntime.Tokenizer(contentsOf: URL(fileURLWithPath: tokenizer), vocabSize: weights.config.vocabSize)
        }
        guard checkpoint == nil else { throw ValidationError("--checkpoint needs --tokenizer to turn text into tokens.") }
        return try ModelCatalog.bundled.tokenizer(for: weights.config)
    }
}

/// Writes a progress line to standard error (results go to standard output).
func progress(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Encodes `value` as sorted, pretty JSON text.
func jsonText(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

/// Seconds taken by `body`.
func seconds(_ body: () throws -> Void) rethrows -> Double {
    let clock = ContinuousClock()
    let elapsed = try clock.measure(body)
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
}
