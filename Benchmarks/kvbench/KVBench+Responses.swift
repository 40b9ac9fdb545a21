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

        @Flag(name: .long, help: "Print JSON.")
        var json = false

        func validate() throws {
            if opens < 1 || opens > 1000 { throw ValidationError("--opens must be in 1...1000, got \(opens).") }
            if changeEvery < 1 { throw ValidationError("--change-every must be at least 1, got \(changeEvery).") }
        }

        func run() async throws {
            options.configureThreads()
            let model = SystemLanguageModel(named: options.model ?? "small")
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kvbench-responses-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let outcomes = try await ScreenOpenSimulation(model: model, opens: opens, changeEvery: changeEvery)
                .run(directory: directory) { progress($0) }
            if json { print(try jsonText(outcomes)); return }
            func f(_ v: Double?) -> String { v.map { String(format: "%.1f", $0) } ?? "–" }
            print("strategy              opens  generations  avoided  memory ms  disk ms  generated ms  first content ms")
            for o in outcomes {
                print(o.strategy.padding(toLength: 20, withPad: " ", startingAt: 0),
                      String(format: "%7d %12d %8d", o.opens, o.generations, o.avoided),
                      f(o.memoryMs).leftPad(10), f(o.diskMs).leftPad(8), f(o.generatedMs).leftPad(13),
                      f(o.timeToFirstContentMs).leftPad(17))
            }
        }
    }
}

extension String {
    func leftPad(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
