import ArgumentParser
import Foundation
import LMRuntime
import LMSession

/// Options shared by the subcommands that run a model: where the model comes from, threads, seed.
///
/// A subcommand that cannot use one of them says so in its `validate()` (``refuse(_:in:)``)
/// rather than ignoring it.
struct ModelOptions: ParsableArguments {
    @Option(name: .long, help: "Bundled model config to use (a name from Models/, e.g. tiny, small, base).")
    var model: String?

    @Option(name: .long, help: "A llama2.c checkpoint (.bin) to use instead of a bundled model.")
    var checkpoint: String?

    @Option(name: .long, help: "A llama2.c tokenizer.bin for --checkpoint.")
    var tokenizer: String?

    @Option(name: .long, help: "A GGUF (version 3) llama or qwen2 model, with its vocabulary, to use instead of a bundled model.")
    var gguf: String?

    @Option(name: .long, help: "With --gguf: the most tokens of context to give the model, when the file declares more (saves K/V memory).")
    var context: Int?

    @Option(name: .long, help: "A LoRA adapter (GGUF; `kvbench adapter` writes one) to merge into the model's float32 weights.")
    var adapter: String?

    @Option(name: .long, help: "Weight precision: f32 or f16 (half the bytes to stream; default: the model's own, f32).")
    var precision: WeightPrecision?

    @Option(name: .long, help: "Threads the runtime splits its work over (default: one per core).")
    var threads: Int?

    @Option(name: .long, help: "Seed for sampling (default 0); the same seed gives the same tokens.")
    var seed: UInt64?

    /// The shared options, by their command-line names.
    enum Name: String, CaseIterable {
        case model, checkpoint, tokenizer, gguf, context, adapter, precision, threads, seed
    }

    func validate() throws {
        let sources = [("--model", model), ("--checkpoint", checkpoint), ("--gguf", gguf)].filter { $0.1 != nil }.map(\.0)
        if sources.count > 1 { throw ValidationError("Use one of \(sources.joined(separator: ", ")), not several.") }
        if tokenizer != nil, checkpoint == nil { throw ValidationError("--tokenizer goes with --checkpoint.") }
        if let context {
            guard gguf != nil else { throw ValidationError("--context goes with --gguf.") }
            guard context >= 1 else { throw ValidationError("--context must be at least 1, got \(context).") }
        }
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1, got \(threads).") }
    }

    /// Rejects any of `unusable` that was given: `subcommand` has no use for it.
    func refuse(_ unusable: [Name], in subcommand: String) throws {
        let given: [Name: Bool] = [.model: model != nil, .checkpoint: checkpoint != nil, .tokenizer: tokenizer != nil,
                                   .gguf: gguf != nil, .context: context != nil, .adapter: adapter != nil, .precision: precision != nil, .threads: threads != nil, .seed: seed != nil]
        if let name = unusable.first(where: { given[$0] == true }) {
            throw ValidationError("kvbench \(subcommand) does not use --\(name.rawValue); drop it.")
        }
    }

    /// Whether the model is named by a file rather than a bundled config.
    var namesAFile: Bool { checkpoint != nil || gguf != nil }

    /// The seed, 0 when not given.
    var seedValue: UInt64 { seed ?? 0 }

    /// Applies `--threads`.
    func configureThreads() {
        if let threads { LMRuntime.Kernels.threadCount = threads }
    }

    /// The weights named by the options (`fallback` when no model is named), read in float32, with
    /// `--adapter` merged, then kept in `--precision` (a GGUF without an adapter is read straight
    /// into it).
    func loadWeights(fallback: String) throws -> ModelWeights { try load(fallback: fallback, tokenizer: false).weights }

    /// The weights (as ``loadWeights(fallback:)``) and their tokenizer: --tokenizer, the GGUF
    /// file's own (the file parsed once for both), or the one the bundled config names.
    func loadModel(fallback: String) throws -> (weights: ModelWeights, tokenizer: LMRuntime.Tokenizer) {
        let loaded = try load(fallback: fallback, tokenizer: true)
        return (loaded.weights, loaded.tokenizer!)
    }

    private func load(fallback: String, tokenizer wantsTokenizer: Bool) throws -> (weights: ModelWeights, tokenizer: LMRuntime.Tokenizer?) {
        let weights: ModelWeights, wanted: WeightPrecision
        var vocabulary: LMRuntime.Tokenizer?
        if let checkpoint {
            (weights, wanted) = (try ModelWeights.checkpoint(at: URL(fileURLWithPath: checkpoint)), precision ?? .f32)
        } else if let gguf {
            wanted = precision ?? .f32
            let url = URL(fileURLWithPath: gguf), file = try GGUFFile(contentsOf: url)
            // Without an adapter to merge in float32, halfs are decoded straight into half storage.
            weights = try ModelWeights.gguf(file, path: url.path, precision: adapter == nil ? wanted : .f32, contextLength: context)
            if wantsTokenizer, tokenizer == nil { vocabulary = try LMRuntime.Tokenizer(gguf: file, path: url.path) }
        } else {
            let catalog = ModelCatalog.bundled
            var config = try catalog.config(named: model ?? fallback)
            wanted = precision ?? config.weightPrecision
            config.weightPrecision = .f32
            if wantsTokenizer, tokenizer == nil {   // a GGUF file holding both is parsed once
                let loaded = try catalog.model(for: config)
                (weights, vocabulary) = (loaded.weights, loaded.tokenizer)
            } else {
                weights = try catalog.weights(for: config)
            }
        }
        if wantsTokenizer, vocabulary == nil {
            guard let tokenizer else { throw ValidationError("--checkpoint needs --tokenizer to turn text into tokens.") }
            vocabulary = try LMRuntime.Tokenizer(contentsOf: URL(fileURLWithPath: tokenizer), vocabSize: weights.config.vocabSize)
        }
        guard let adapter else { return (try weights.converted(to: wanted), vocabulary) }
        return (try weights.merging(LowRankAdapter(contentsOf: URL(fileURLWithPath: adapter))).converted(to: wanted), vocabulary)
    }

    /// The model for the session API (`fallback` when no model is named), with `--adapter` merged.
    func sessionModel(fallback: String, prefixStore: PrefixStore.Configuration = .standard) throws -> SystemLanguageModel {
        let adapter = try adapter.map { try SystemLanguageModel.Adapter(fileURL: URL(fileURLWithPath: $0)) }
        if let checkpoint {
            guard let tokenizer else { throw ValidationError("--checkpoint needs --tokenizer (with the session control pieces).") }
            return SystemLanguageModel(checkpoint: URL(fileURLWithPath: checkpoint), tokenizer: URL(fileURLWithPath: tokenizer),
                                       adapter: adapter, weightPrecision: precision, prefixStore: prefixStore)
        }
        if let gguf {
            return SystemLanguageModel(gguf: URL(fileURLWithPath: gguf), adapter: adapter, weightPrecision: precision,
                                       contextLength: context, prefixStore: prefixStore)
        }
        return SystemLanguageModel(named: model ?? fallback, adapter: adapter, weightPrecision: precision, prefixStore: prefixStore)
    }
}

extension WeightPrecision: ExpressibleByArgument {}

/// The output format of a subcommand.
enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
    case text, table, json, csv, markdown
}

/// `--format`, with `--json` kept as its alias.
struct OutputOptions: ParsableArguments {
    @Option(name: .long, help: "Output format: text, table, json, csv or markdown (each subcommand names the ones it writes).")
    var format: OutputFormat?

    @Flag(name: .long, help: "Same as --format json.")
    var json = false

    /// The chosen format, checked against what `subcommand` can write (`supported`, default first).
    func resolved(_ supported: [OutputFormat], in subcommand: String) throws -> OutputFormat {
        if json, let format, format != .json { throw ValidationError("--json contradicts --format \(format.rawValue).") }
        let chosen = json ? .json : format ?? supported[0]
        guard supported.contains(chosen) else {
            throw ValidationError("kvbench \(subcommand) writes --format \(supported.map(\.rawValue).joined(separator: ", ")); not \(chosen.rawValue).")
        }
        return chosen
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
