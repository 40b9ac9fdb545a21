import Foundation
import LMSession
import ResponseCache

/// An app opening a screen again and again: each open asks the model for a summary of
/// the screen's data, which changes now and then. Compares response-cache policies.
public struct ScreenOpenSimulation: Sendable {
    /// One way of serving the screen.
    public enum Strategy: String, CaseIterable, Sendable {
        /// Generate on every open.
        case noCache = "no-cache"
        /// Cache-aside in memory.
        case memory = "cache-else-generate"
        /// Cache-aside, the app restarted before every open (memory empty, disk serves).
        case diskAfterRestart = "disk-after-restart"
        /// Stale-while-revalidate: show the cached summary at once, then the fresh one.
        case staleWhileRevalidate = "cache-then-generate"
        /// Cache-aside on a directory shared with a widget (another process) that invalidates its
        /// own entries (tag `weather`) while each of the app's generations runs: the directory's
        /// invalidation journal tells the app those invalidations were not about its summary.
        case sharedWithWidget = "shared-with-widget"
    }

    /// What one strategy cost.
    public struct Outcome: Codable, Sendable {
        /// Strategy name.
        public var strategy: String
        /// Screen opens.
        public var opens: Int
        /// Generations that ran.
        public var generations: Int
        /// Opens served without generating first.
        public var avoided: Int
        /// Median latency of answers served from memory, disk and generation (ms; `nil` when none).
        public var memoryMs: Double?, diskMs: Double?, generatedMs: Double?
        /// Median time until the screen shows content (ms).
        public var timeToFirstContentMs: Double
    }

    let model: any LanguageModel
    let opens: Int
    let changeEvery: Int
    let responseTokens: Int

    /// A simulation of `opens` screen opens whose data changes every `changeEvery` opens.
    public init(model: any LanguageModel, opens: Int = 24, changeEvery: Int = 6, responseTokens: Int = 16) {
        self.model = model
        self.opens = opens
        self.changeEvery = max(1, changeEvery)
        self.responseTokens = responseTokens
    }

    /// Runs every strategy; `directory` holds the disk tiers (one subfolder each).
    public func run(directory: URL, progress: @Sendable (String) -> Void = { _ in }) async throws -> [Outcome] {
        var outcomes: [Outcome] = []
        for strategy in Strategy.allCases {
            progress("responses: \(strategy.rawValue)…")
            outcomes.append(try await run(strategy, directory: directory.appendingPathComponent(strategy.rawValue)))
        }
        return outcomes
    }

    func run(_ strategy: Strategy, directory: URL) async throws -> Outcome {
        let options = GenerationOptions(maximumResponseTokens: responseTokens)
        let instructions = "You summarise a runner's training week for the home screen of a running app. Two sentences."
        var cache = ResponseCache<CachedResponse>(configuration: .init(directory: directory))
        let widget = strategy == .sharedWithWidget ? ResponseCache<CachedResponse>(configuration: .init(directory: directory)) : nil
        var latencies: [CacheAnswer<CachedResponse>.Origin: [Double]] = [:]
        var firstContent: [Double] = []
        var generations = 0
        let clock = ContinuousClock()
        for open in 0 ..< opens {
            let version = open / changeEvery
            let session = LanguageModelSession(model: model, instructions: Instructions(instructions))
            let prompt = Prompt("Summarise this week: sessions \(version * 3 + 1) to \(version * 3 + 5), long run on Sunday.")
            if strategy == .diskAfterRestart {
                cache = ResponseCache<CachedResponse>(configuration: .init(directory: directory))   // a new process
            }
            let start = clock.now
            switch strategy {
            case .noCache:
                _ = try await session.respond(to: prompt, options: options)
                generations += 1
                let ms = start.duration(to: clock.now).milliseconds
                latencies[.generated, default: []].append(ms)
                firstContent.append(ms)
            case .memory, .diskAfterRestart:
                let answer = try await session.respond(to: prompt, options: options, cache: cache,
                                                       dataFingerprint: "week:\(version)", tags: ["home"])
                let ms = start.duration(to: clock.now).milliseconds
                if answer.origin == .generated { generations += 1 }
                latencies[answer.origin, default: []].append(ms)
                firstContent.append(ms)
            case .sharedWithWidget:
                let key = try await session.cacheKey(for: prompt, options: options, dataFingerprint: "week:\(version)", tags: ["home"])
                let answer = try await cache.value(for: key) {
                    await widget?.invalidate(tag: "weather")   // the widget's own refresh, meanwhile
                    let response = try await session.respond(to: prompt, options: options)
                    return CachedResponse(content: response.content, tokenIDs: [])
                }
                let ms = start.duration(to: clock.now).milliseconds
                if answer.origin == .generated { generations += 1 }
                latencies[answer.origin, default: []].append(ms)
                firstContent.append(ms)
            case .staleWhileRevalidate:
                // The key ignores the data version: every open shows the last summary at once and
                // then the fresh one (SWR always refreshes: it trades generations for latency).
                // The stream is read to its end, so no generation outlives its screen.
                let key = try await session.cacheKey(for: Prompt("Summarise this week."), options: options, tags: ["home"])
                var first = true
                for try await answer in cache.responses(for: key, policy: .cacheThenGenerate, generate: {
                    let r = try await session.respond(to: prompt, options: options)
                    return CachedResponse(content: r.content, tokenIDs: [])
                }) {
                    let ms = start.duration(to: clock.now).milliseconds
                    if first { firstContent.append(ms); first = false }
                    if answer.origin == .generated { generations += 1 }
                    latencies[answer.origin, default: []].append(ms)
                }
            }
        }
        return Outcome(strategy: strategy.rawValue, opens: opens, generations: generations, avoided: opens - generations,
                       memoryMs: Self.median(latencies[.memory]), diskMs: Self.median(latencies[.disk]),
                       generatedMs: Self.median(latencies[.generated]), timeToFirstContentMs: Self.median(firstContent) ?? 0)
    }

    static func median(_ values: [Double]?) -> Double? {
        guard let values, !values.isEmpty else { return nil }
        return values.sorted()[values.count / 2]
    }
}
