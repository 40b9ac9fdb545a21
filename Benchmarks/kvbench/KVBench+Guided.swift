import ArgumentParser
import Foundation
import LMRuntime
import LMSession

/// The structured value `kvbench guided` generates: every kind of guide in one schema.
@Generable(description: "A training summary")
struct GuidedBenchSummary {
    @Guide(description: "Overall performance insight")
    let insight: String
    @Guide(description: "Two or three drills", .count(2 ... 3))
    let drills: [GuidedBenchDrill]
    @Guide(description: "Score from 1 to 10", .range(1 ... 10))
    let score: Int
    @Guide(description: "Session code", .pattern(/[A-Z]{2}-\d{3}/))
    let code: String
    let tired: Bool
}

@Generable
struct GuidedBenchDrill {
    @Guide(description: "Drill title")
    let title: String
    @Guide(.anyOf(["easy", "medium", "hard"]))
    let level: String
    @Guide(.range(0.5 ... 3.0))
    let minutes: Double
}

extension KVBench {
    /// `kvbench guided`: what constrained decoding costs per token, against the decode step.
    struct Guided: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure guided generation: mask time per token (mean, p50, p99) against the decode step, on a real model.")

        @OptionGroup var options: ModelOptions

        @Option(name: .long, help: "Structured responses to generate.")
        var responses: Int = 8

        @Option(name: .long, help: "Token budget per response.")
        var maxTokens: Int = 160

        @OptionGroup var output: OutputOptions

        static let formats: [OutputFormat] = [.text, .json]

        func validate() throws {
            _ = try output.resolved(Self.formats, in: "guided")
            if responses < 2 { throw ValidationError("--responses must be at least 2 (the first one warms the masks), got \(responses).") }
            if maxTokens < 1 { throw ValidationError("--max-tokens must be at least 1, got \(maxTokens).") }
        }

        struct Figures: Encodable {
            let model: String
            let vocab_size: Int
            let responses: Int
            let tokens: Int
            let mask_mean_us: Double
            let mask_p50_us: Double
            let mask_p99_us: Double
            let mask_max_us: Double
            let first_response_mask_mean_us: Double
            let decode_ms_per_token: Double
            let mask_share_of_decode: Double
            let all_valid: Bool
        }

        func run() async throws {
            let json = try output.resolved(Self.formats, in: "guided") == .json
            options.configureThreads()
            let model = try options.sessionModel(fallback: "base", prefixStore: .memoryOnly(memoryByteLimit: 0))
            let loaded = try model.loaded()
            var warm: [UInt64] = [], first: [UInt64] = []
            var decodeSeconds = 0.0, decodeTokens = 0
            var valid = true
            for r in 0 ..< responses {
                let session = LanguageModelSession(model: model, instructions: "You are a tennis coach.")
                let sampling = GenerationOptions(samplingMode: .random(top: 40, seed: options.seedValue &+ UInt64(r)), temperature: 0.9,
                                                 maximumResponseTokens: maxTokens)
                let response = try await session.respond(to: "Summarize today's practice.", generating: GuidedBenchSummary.self,
                                                         options: sampling)
                let summary = response.content
                valid = valid && (2 ... 3).contains(summary.drills.count) && (1 ... 10).contains(summary.score)
                    && summary.code.wholeMatch(of: /[A-Z]{2}-\d{3}/) != nil
                let masks = response.usage.guidedMaskNanoseconds
                if r == 0 { first = masks } else { warm += masks }
                decodeSeconds += response.usage.decodeDuration.seconds
                decodeTokens += response.usage.output.totalTokenCount
                progress("response \(r + 1): \(response.usage.output.totalTokenCount) tokens, \(response.rawContent.jsonString.prefix(80))…")
            }
            let sorted = warm.sorted()
            func us(_ n: UInt64) -> Double { Double(n) / 1000 }
            func percentile(_ p: Double) -> Double { us(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) }
            let mean = us(warm.reduce(0, +)) / Double(max(1, warm.count))
            let decode = decodeSeconds * 1000 / Double(max(1, decodeTokens))
            let figures = Figures(
                model: loaded.name, vocab_size: loaded.tokenizer.vocabSize, responses: responses, tokens: warm.count + first.count,
                mask_mean_us: mean, mask_p50_us: percentile(0.5), mask_p99_us: percentile(0.99), mask_max_us: us(sorted.last ?? 0),
                first_response_mask_mean_us: us(first.reduce(0, +)) / Double(max(1, first.count)),
                decode_ms_per_token: decode, mask_share_of_decode: mean / 1000 / decode, all_valid: valid)
            if json {
                print(try jsonText(figures))
                return
            }
            print("""
                guided generation on \(figures.model) (vocabulary \(figures.vocab_size)), \(responses) responses, \(figures.tokens) tokens
                  mask per token (warm): mean \(String(format: "%.1f", mean)) µs, p50 \(String(format: "%.1f", figures.mask_p50_us)) µs, \
                p99 \(String(format: "%.1f", figures.mask_p99_us)) µs, max \(String(format: "%.1f", figures.mask_max_us)) µs
                  first response (masks built): mean \(String(format: "%.1f", figures.first_response_mask_mean_us)) µs per token
                  decode step: \(String(format: "%.2f", decode)) ms per token; mask share \(String(format: "%.2f", figures.mask_share_of_decode * 100)) %
                  every response valid under its guides: \(valid ? "yes" : "NO")
                """)
        }
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}
