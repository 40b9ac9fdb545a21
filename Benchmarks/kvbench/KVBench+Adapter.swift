import ArgumentParser
import Foundation
import LMRuntime
import LMSession

extension KVBench {
    /// `kvbench adapter`: a synthetic LoRA adapter for a model, to try `SystemLanguageModel.Adapter`.
    struct Adapter: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a synthetic LoRA adapter (GGUF) for a model.",
            discussion: """
                The factors are seeded random values sized so that the update is about --strength times a \
                projection's own variance: the adapted model says other things, at the base model's speed, \
                and shares no cached K/V with it. Run any subcommand with --adapter FILE to use it, or put it \
                in the adapter directory as fmadapter-<name>-<version>.gguf for SystemLanguageModel.Adapter(name:). \
                Example:
                  kvbench adapter --model tiny --rank 8 --output tiny-demo.gguf
                  kvbench generate --model tiny --adapter tiny-demo.gguf --prompt "Once upon a time"
                """)

        @OptionGroup var options: ModelOptions

        @Option(name: .long, help: "The file to write (.gguf).")
        var output: String

        @Option(name: .long, help: "The factors' rank (default 8).")
        var rank = 8

        @Option(name: .long, help: "LoRA's alpha; the update is scaled by alpha / rank (default: the rank).")
        var alpha: Float?

        @Option(name: .long, help: "The update's size relative to a projection's (default 0.25).")
        var strength: Float = 0.25

        @Option(name: .long, parsing: .upToNextOption,
                help: "Projections to adapt: attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down (default: all).")
        var projections: [String] = LowRankAdapter.Projection.allCases.map(\.rawValue)

        @Option(name: .long, help: "Seed of the factors (default 1).")
        var adapterSeed: UInt64 = 1

        @Option(name: .long, help: "The adapter's name: letters, digits and underscores (default: adapter).")
        var name = "adapter"

        @Option(name: .long, help: "Creator-defined metadata, a JSON object (default {}).")
        var metadata = "{}"

        func validate() throws {
            try options.refuse([.adapter, .precision, .threads, .seed], in: "adapter")
            guard output.lowercased().hasSuffix(".gguf") else { throw ValidationError("--output must end in .gguf, got '\(output)'.") }
            guard rank >= 1 else { throw ValidationError("--rank must be at least 1, got \(rank).") }
            if let alpha, !alpha.isFinite { throw ValidationError("--alpha must be finite.") }
            guard strength.isFinite, strength >= 0 else { throw ValidationError("--strength must be finite and not negative, got \(strength).") }
            if let unknown = projections.first(where: { LowRankAdapter.Projection(rawValue: $0) == nil }) {
                throw ValidationError("--projections: '\(unknown)' is not one of \(LowRankAdapter.Projection.allCases.map(\.rawValue).joined(separator: ", ")).")
            }
            guard SystemLanguageModel.Adapter.isValidName(name) else {
                throw ValidationError("--name must be letters, digits and underscores, got '\(name)'.")
            }
            guard (try? JSONSerialization.jsonObject(with: Data(metadata.utf8))) is [String: Any] else {
                throw ValidationError("--metadata must be a JSON object, got '\(metadata)'.")
            }
        }

        func run() async throws {
            let weights = try options.loadWeights(fallback: "base")
            guard rank <= min(weights.config.dim, weights.config.kvDim) else {
                throw ValidationError("--rank \(rank) exceeds the smallest projection width of this model (\(min(weights.config.dim, weights.config.kvDim))).")
            }
            let adapter = LowRankAdapter.random(for: weights, rank: rank, alpha: alpha,
                                                projections: projections.compactMap(LowRankAdapter.Projection.init(rawValue:)),
                                                strength: strength, seed: adapterSeed, name: name, creatorDefinedMetadata: metadata)
            let data = try adapter.ggufData()
            try data.write(to: URL(fileURLWithPath: output), options: .atomic)
            let version = String(adapter.baseFingerprint.description.prefix(8))
            print("""
                wrote \(output): LoRA rank \(rank), \(adapter.factors.count) projections over \(weights.config.layerCount) layers, \(data.count) bytes
                made for \(weights.config.name), base fingerprint \(adapter.baseFingerprint)
                to load it by name: \(SystemLanguageModel.Adapter.directory.path)/fmadapter-\(name)-\(version).gguf
                """)
        }
    }
}
