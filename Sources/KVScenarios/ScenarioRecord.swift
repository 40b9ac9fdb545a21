import Foundation
import LMSession

/// One turn of one scenario, as `kvbench --format json` prints it.
public struct ScenarioTurn: Codable, Sendable, Equatable {
    /// Scenario name.
    public var scenario: String
    /// Turn number, from 1.
    public var turn: Int
    /// Tokens the request rendered.
    public var input_tokens: Int
    /// Of those, tokens reused from the KV cache (the session's own, or restored from the store).
    public var cached_tokens: Int
    /// Of the cached tokens, those restored from the shared prefix store's memory.
    public var cached_from_store: Int
    /// Of the cached tokens, those read from the store's disk tier.
    public var cached_from_disk: Int
    /// The process's resident memory after the turn, in MiB (`nil` where it cannot be read).
    public var resident_mib: Double?
    /// Tokens generated.
    public var output_tokens: Int
    /// Time spent prefilling, in milliseconds.
    public var prefill_ms: Double
    /// Time to the first generated token, in milliseconds.
    public var ttft_ms: Double
    /// First recomputed position when cached tokens were thrown away (or the cache was empty).
    public var invalidated_at: Int?
    /// The segment that position falls in.
    public var invalidated_segment: String?
    /// Why (`prefixChanged`, `emptyCache`, `profileSwitch`).
    public var invalidation_reason: String?
    /// Projected time to first token per device profile, in milliseconds (a projection, not a measurement).
    public var projected_ttft_ms: [String: Double]

    /// Tokens computed rather than reused.
    public var recomputed_tokens: Int { input_tokens - cached_tokens }
}

/// All turns of one scenario, with the totals the table shows.
public struct ScenarioResult: Sendable {
    /// The scenario that ran.
    public var scenario: Scenario
    /// Its turns, in order.
    public var turns: [ScenarioTurn]
    /// Positions whose K/V rows the shared prefix store holds in memory when the scenario ends
    /// (`nil` with the store off). Every position once: entries that part are split where they do.
    public var storePositionsHeld: Int?

    /// Input tokens over all turns.
    public var inputTokens: Int { turns.map(\.input_tokens).reduce(0, +) }
    /// Cached tokens over all turns.
    public var cachedTokens: Int { turns.map(\.cached_tokens).reduce(0, +) }
    /// Recomputed tokens over all turns.
    public var recomputedTokens: Int { inputTokens - cachedTokens }
    /// Cached ÷ input tokens.
    public var hitRate: Double { inputTokens == 0 ? 0 : Double(cachedTokens) / Double(inputTokens) }
    /// Median time to first token, in milliseconds.
    public var medianTTFT: Double {
        let sorted = turns.map(\.ttft_ms).sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
    /// Worst time to first token, in milliseconds.
    public var worstTTFT: Double { turns.map(\.ttft_ms).max() ?? 0 }
    /// Total prefill time, in milliseconds.
    public var prefillTotal: Double { turns.map(\.prefill_ms).reduce(0, +) }

    /// A short line saying what invalidated the cache, from the session's reports, and what the
    /// shared prefix store restored.
    public var invalidationSummary: String {
        let store = turns.map(\.cached_from_store).reduce(0, +), disk = turns.map(\.cached_from_disk).reduce(0, +)
        guard store + disk > 0 else { return ownCacheSummary }
        let held = storePositionsHeld.map { "; it holds \($0) positions' rows" } ?? ""
        return ownCacheSummary + "; \(store + disk) tokens restored from the shared store (\(disk) from disk)" + held
    }

    private var ownCacheSummary: String {
        let lost = turns.filter { $0.invalidated_at != nil && $0.invalidation_reason != "emptyCache" }
        guard !lost.isEmpty else {
            let cold = turns.filter { $0.invalidation_reason == "emptyCache" }.count
            return cold == 0 ? "nothing invalidated: every turn reused the whole cache"
                : "cold caches only (\(cold) turn\(cold == 1 ? "" : "s") started from an empty cache)"
        }
        var counts: [String: Int] = [:]
        var order: [String] = []
        for t in lost {
            let key = "\(t.invalidation_reason ?? "?") at \(t.invalidated_segment ?? "?")"
            if counts[key] == nil { order.append(key) }
            counts[key, default: 0] += 1
        }
        return order.map { "\($0) (\(counts[$0]!)×)" }.joined(separator: "; ")
    }
}
