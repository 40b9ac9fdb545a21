import ArgumentParser
import Foundation
import KVScenarios
import LMSession

extension KVBench {
    /// `kvbench responses`: what a response cache saves when an app reopens a screen.
    struct Responses: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Simulate an app reopening a screen whose data changes now and then, under each response-cache policy.")

        @OptionGroup var options: ModelOptions

        @Option(name: .long, help: "Screen opens.")
        var opens: Int = 24

        @Option(name: .long, help: "The screen's data changes every this many opens.")
        var changeEvery: Int = 6

        @OptionGroup var output: OutputOptions

        static let formats: [OutputFormat] = [.table, .json, .csv, .markdown]

        func validate() throws {
            try options.refuse([.seed], in: "responses")   // the simulation decodes greedily
            _ = try output.resolved(Self.formats, in: "responses")
            if opens < 1 || opens > 1000 { throw ValidationError("--opens must be in 1...1000, got \(opens).") }
            if changeEvery < 1 { throw ValidationError("--change-every must be at least 1, got \(changeEvery).") }
        }

        func run() async throws {
            options.configureThreads()
            let format = try output.resolved(Self.formats, in: "responses")
            let model = try options.sessionModel(fallback: "small")
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kvbench-responses-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let outcomes = try await ScreenOpenSimulation(model: model, opens: opens, changeEvery: changeEvery)
                .run(directory: directory) { progress($0) }
            if format == .json { print(try jsonText(outcomes)); return }
            func f(_ v: Double?) -> String { v.map { String(format: "%.1f", $0) } ?? "–" }
            let table = TextTable(
                header: ["strategy", "opens", "generations", "avoided", "memory ms", "disk ms", "generated ms", "first content ms"],
                rows: outcomes.map { o in
                    [o.strategy, "\(o.opens)", "\(o.generations)", "\(o.avoided)", f(o.memoryMs), f(o.diskMs), f(o.generatedMs),
                     f(o.timeToFirstContentMs)]
                })
            print(table.render(format))
        }
    }
}
