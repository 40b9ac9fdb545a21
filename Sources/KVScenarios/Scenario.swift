import Foundation
import LMRuntime
import LMSession

/// A multi-turn conversation that exercises one way of structuring a session.
public struct Scenario: Sendable {
    /// Short name for `--scenario` (e.g. `stable-append`).
    public let name: String
    /// The numbered group it belongs to (1–10), shared by the variants compared side by side.
    public let group: Int
    /// One-line description.
    public let title: String
    /// The shared prefix store its sessions get: off for the scenarios about one session's own
    /// cache, so they show exactly that; on for those about sharing and relaunching.
    let prefixStore: PrefixStore.Configuration
    let body: @Sendable (ScenarioContext) async throws -> Void

    init(name: String, group: Int, title: String, prefixStore: PrefixStore.Configuration = .off,
         body: @escaping @Sendable (ScenarioContext) async throws -> Void) {
        self.name = name
        self.group = group
        self.title = title
        self.prefixStore = prefixStore
        self.body = body
    }
}

extension PrefixStore.Configuration {
    /// No sharing between sessions: nothing fits in zero bytes.
    static let off = PrefixStore.Configuration.memoryOnly(memoryByteLimit: 0)
}

/// What a scenario body uses: the model, options for each turn, and a recorder.
public final class ScenarioContext: @unchecked Sendable {
    /// The model every session in the scenario runs.
    public let model: any LanguageModel
    /// Turns to run.
    public let turns: Int
    /// Seed for sampling (responses differ by seed; token counts are fixed for a seed).
    public let seed: UInt64
    /// Tokens per response.
    public let responseTokens: Int
    let projector: Projector
    let scenario: String
    private(set) var records: [ScenarioTurn] = []
    let onTurn: @Sendable (ScenarioTurn) -> Void

    init(model: any LanguageModel, turns: Int, seed: UInt64, responseTokens: Int, projector: Projector,
         scenario: String, onTurn: @escaping @Sendable (ScenarioTurn) -> Void) {
        self.model = model
        self.turns = turns
        self.seed = seed
        self.responseTokens = responseTokens
        self.projector = projector
        self.scenario = scenario
        self.onTurn = onTurn
    }

    /// Options for turn `turn`: a fixed response length, seeded sampling.
    func options(_ turn: Int) -> GenerationOptions {
        GenerationOptions(samplingMode: .random(top: 40, seed: seed &+ UInt64(turn)), temperature: 0.8,
                          maximumResponseTokens: responseTokens)
    }

    /// Runs turn `turn` of `session` with `prompt` and records it.
    @discardableResult
    func turn(_ turn: Int, _ session: LanguageModelSession, _ prompt: String,
              contextOptions: ContextOptions = ContextOptions()) async throws -> LanguageModelSession.Response<String> {
        let response = try await session.respond(to: Prompt(prompt), options: options(turn), contextOptions: contextOptions)
        record(turn, response)
        return response
    }

    /// Runs every turn on one session, prompting from `prompts` in order.
    func converse(_ session: LanguageModelSession, _ prompts: [String], contextOptions: ContextOptions = ContextOptions()) async throws {
        for t in 0 ..< turns { try await turn(t, session, ScenarioTexts.prompt(prompts, turn: t), contextOptions: contextOptions) }
    }

    func record<Content>(_ turn: Int, _ response: LanguageModelSession.Response<Content>) {
        let usage = response.usage
        let report = response.invalidation
        let record = ScenarioTurn(
            scenario: scenario, turn: turn + 1, input_tokens: usage.input.totalTokenCount,
            cached_tokens: usage.input.cachedTokenCount, cached_from_store: usage.input.cachedFromSharedStoreCount,
            cached_from_disk: usage.input.cachedFromDiskCount, resident_mib: ResidentMemory.mebibytes(),
            output_tokens: usage.output.totalTokenCount,
            prefill_ms: usage.prefillDuration.milliseconds, ttft_ms: usage.timeToFirstToken.milliseconds,
            invalidated_at: report?.position, invalidated_segment: report.map { "\($0.segment)" },
            invalidation_reason: report?.reason.rawValue,
            projected_ttft_ms: projector.ttft(cached: usage.input.cachedTokenCount, computed: usage.computedTokenCount))
        records.append(record)
        onTurn(record)
    }

}

/// Runs scenarios on a model.
public struct ScenarioRunner: Sendable {
    /// The model.
    public let model: any LanguageModel
    /// Turns per scenario.
    public let turns: Int
    /// Sampling seed.
    public let seed: UInt64
    /// Tokens per response.
    public let responseTokens: Int
    /// Device profiles for the projected latency column.
    public let devices: [DeviceProfile]

    /// A runner.
    public init(model: any LanguageModel, turns: Int, seed: UInt64, responseTokens: Int = 12, devices: [DeviceProfile] = []) {
        self.model = model
        self.turns = turns
        self.seed = seed
        self.responseTokens = responseTokens
        self.devices = devices
    }

    /// Runs `scenario`, calling `onTurn` after each turn.
    ///
    /// Each scenario runs on a model of its own (the same weights and tokenizer) with the
    /// scenario's prefix store, so no scenario sees what another computed.
    public func run(_ scenario: Scenario, onTurn: @escaping @Sendable (ScenarioTurn) -> Void = { _ in }) async throws -> ScenarioResult {
        let loaded = try model.loaded()
        let config = loaded.weights.config
        let isolated = SystemLanguageModel(try LoadedModel(weights: loaded.weights, tokenizer: loaded.tokenizer,
                                                           name: loaded.name, prefixStore: scenario.prefixStore))
        let context = ScenarioContext(model: isolated, turns: turns, seed: seed, responseTokens: responseTokens,
                                      projector: Projector(config: config, devices: devices),
                                      scenario: scenario.name, onTurn: onTurn)
        try await scenario.body(context)
        let store = try isolated.loaded().prefixStore
        let rowBytes = 2 * config.layerCount * config.kvDim * MemoryLayout<Float>.stride
        return ScenarioResult(scenario: scenario, turns: context.records,
                              storePositionsHeld: scenario.prefixStore.memoryByteLimit > 0 ? store.statistics.byteCount / rowBytes : nil)
    }
}

extension Duration {
    /// The duration in milliseconds.
    var milliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) * 1e-15 }
}
