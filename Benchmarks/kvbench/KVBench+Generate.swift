import ArgumentParser
import Foundation
import LMRuntime

extension KVBench {
    /// `kvbench generate`: prompt in, text out.
    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Generate text from a prompt (greedy by default; stops on BOS like llama2.c, or on a byte-level vocabulary's EOS).")

        @OptionGroup var options: ModelOptions

        @Option(name: .long, help: "The prompt text.")
        var prompt: String

        @Option(name: .long, help: "The most tokens to generate.")
        var maxTokens: Int = 64

        @Option(name: .long, help: "Sampling temperature; 0 is greedy.")
        var temperature: Float = 0

        @Option(name: .long, help: "Top-p (nucleus) threshold in (0, 1]; 1 samples from the full distribution.")
        var topP: Float = 1

        @OptionGroup(title: "Output (json: {prompt_token_ids, generated_token_ids, text})") var output: OutputOptions

        static let formats: [OutputFormat] = [.text, .json]

        func validate() throws {
            _ = try output.resolved(Self.formats, in: "generate")
            if maxTokens < 0 { throw ValidationError("--max-tokens must not be negative, got \(maxTokens).") }
            if !(temperature >= 0 && temperature.isFinite) { throw ValidationError("--temperature must be ≥ 0, got \(temperature).") }
            if !(topP > 0 && topP <= 1) { throw ValidationError("--top-p must be in (0, 1], got \(topP).") }
        }

        struct Output: Encodable {
            let prompt_token_ids: [Int]
            let generated_token_ids: [Int]
            let text: String
        }

        func run() async throws {
            let json = try output.resolved(Self.formats, in: "generate") == .json
            options.configureThreads()
            let (weights, tokenizer) = try options.loadModel(fallback: "base")
            let model = Transformer(weights: weights)
            let promptTokens = tokenizer.encode(prompt)
            var sampler = try Sampler(topP < 1 ? .topP(topP, temperature: temperature) : .temperature(temperature), seed: options.seedValue)
            var previous = promptTokens.last
            if !json { FileHandle.standardOutput.write(Data(tokenizer.decode(promptTokens).utf8)) }
            let out = try model.generate(prompt: promptTokens, maxNewTokens: maxTokens, sampler: &sampler,
                                         cache: model.makeCache(), stopTokens: tokenizer.stopTokens) { token in
                guard !json else { return }
                FileHandle.standardOutput.write(Data(tokenizer.bytes(of: token, after: previous)))
                previous = token
            }
            if json {
                let text = tokenizer.decode(promptTokens + out.generatedTokens)
                print(try jsonText(Output(prompt_token_ids: promptTokens, generated_token_ids: out.generatedTokens, text: text)))
            } else {
                print()
            }
        }
    }
}
