import ArgumentParser
import Foundation
import KVScenarios
import LMRuntime
import LMSession

extension KVBench {
    /// `kvbench scenarios` (the default): prefix-change scenarios side by side.
    struct Scenarios: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run prefix-change scenarios on the public session API and compare cache reuse and latency.")

        static let formats: [OutputFormat] = [.table, .json, .csv, .markdown]

        @OptionGroup var options: ModelOptions

        @OptionGroup var output: OutputOptions

        @Option(name: .long, help: "Scenario to run (repeatable; default: all). See --list.")
        var scenario: [String] = []

        @Option(name: .long, help: "Turns per scenario.")
        var turns: Int?

        @Option(name: .long, help: "Tokens generated per response.")
        var responseTokens: Int = 12

        @Option(name: .long, help: "Show a per-turn bar chart of reused vs recomputed tokens for this scenario.")
        var timeline: String?

        @Option(name: .long, help: "Write an SVG chart (one panel per scenario group: hit rate and TTFT per turn, prefill totals) to this file.")
        var svg: String?

        @Option(name: .long, help: "Write a self-contained HTML report (machine, table, chart, invalidations) to this file.")
        var html: String?

        @Flag(name: .long, help: "Run the smaller `small` model with 4 turns (about 30 s).")
        var quick = false

        @Flag(name: .long, help: "List the scenarios and exit.")
        var list = false

        func validate() throws {
            if let turns, turns < 1 || turns > 64 { throw ValidationError("--turns must be in 1...64, got \(turns).") }
            if responseTokens < 1 || responseTokens > 512 {
                throw ValidationError("--response-tokens must be in 1...512, got \(responseTokens).")
            }
            let names = Set(ScenarioCatalog.all.map(\.name))
            for name in scenario + (timeline.map { [$0] } ?? []) where !names.contains(name) {
                throw ValidationError("unknown scenario '\(name)'; run `kvbench scenarios --list` for the names.")
            }
            if quick, options.model != nil || options.namesAFile {
                throw ValidationError("--quick picks the model itself; drop --model/--checkpoint/--gguf or --quick.")
            }
            let format = try output.resolved(Self.formats, in: "scenarios")
            if timeline != nil, format == .json || format == .csv {
                throw ValidationError("--timeline prints a text chart; it goes with --format table or markdown, not \(format.rawValue).")
            }
        }

        func run() async throws {
            if list {
                for s in ScenarioCatalog.all { print("\(s.group). \(s.name.padding(toLength: 26, withPad: " ", startingAt: 0)) \(s.title)") }
                return
            }
            options.configureThreads()
            let format = try output.resolved(Self.formats, in: "scenarios")
            let model = try options.sessionModel(fallback: quick ? "small" : "base")
            let devices = (try? DeviceProfile.load(ModelCatalog.bundled.directory.appendingPathComponent("devices/profiles.json"))) ?? []
            let runner = ScenarioRunner(model: model, turns: turns ?? (quick ? 4 : 6), seed: options.seedValue,
                                        responseTokens: responseTokens, devices: devices)
            var chosen = scenario.isEmpty ? ScenarioCatalog.all : scenario.compactMap(ScenarioCatalog.named)
            if let timeline, !chosen.contains(where: { $0.name == timeline }) { chosen += [ScenarioCatalog.named(timeline)!] }
            progress("model \(try model.loaded().name), \(runner.turns) turns per scenario, \(chosen.count) scenarios")
            var results: [ScenarioResult] = []
            var failures: [String] = []
            for (i, s) in chosen.enumerated() {
                progress("[\(i + 1)/\(chosen.count)] \(s.name)…")
                do {
                    results.append(try await runner.run(s) { turn in
                        progress("    turn \(turn.turn): \(turn.cached_tokens)/\(turn.input_tokens) cached, TTFT \(Int(turn.ttft_ms)) ms")
                    })
                } catch {
                    // One scenario that cannot run on this model (a tiny window, say) does not stop the others.
                    progress("    skipped: \(error)")
                    failures.append("\(s.name): \(error)")
                }
            }
            guard !results.isEmpty else { throw ValidationError("no scenario could run: \(failures.joined(separator: "; "))") }
            let report = ScenarioReport(results: results, devices: devices.map(\.name))
            switch format {
            case .table: print(report.table())
            case .markdown: print(report.markdown())
            case .csv: print(report.csv(), terminator: "")
            case .json, .text: print(try jsonText(results.flatMap(\.turns)))
            }
            if let timeline, let result = results.first(where: { $0.scenario.name == timeline }) {
                print(report.timeline(result))
            }
            if let svg {
                try SVGChart(results: results).render().write(toFile: svg, atomically: true, encoding: .utf8)
                progress("wrote \(svg)")
            }
            if let html {
                let page = HTMLReport(report: report, machine: .current, command: CommandLine.arguments.dropFirst().joined(separator: " "))
                try page.render().write(toFile: html, atomically: true, encoding: .utf8)
                progress("wrote \(html)")
            }
        }
    }
}
