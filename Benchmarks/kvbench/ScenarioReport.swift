import Foundation
import KVScenarios

/// Formats scenario results as a table, Markdown, CSV or a per-turn timeline.
struct ScenarioReport {
    let results: [ScenarioResult]
    let devices: [String]

    static let columns = ["scenario", "turns", "input", "cached", "hit rate", "recomputed", "TTFT median ms",
                          "TTFT worst ms", "prefill total ms", "vs baseline"]

    /// Prefill time relative to the baseline scenario (stable-append), when it ran.
    private func relative(_ r: ScenarioResult) -> String {
        guard let base = results.first(where: { $0.scenario.name == "stable-append" }), base.prefillTotal > 0 else { return "–" }
        if r.scenario.name == base.scenario.name { return "baseline" }
        let ratio = r.prefillTotal / base.prefillTotal
        return ratio >= 1 ? String(format: "%.1f× slower", ratio) : String(format: "%.1f× faster", 1 / ratio)
    }

    private func projected(_ r: ScenarioResult, _ device: String) -> String {
        let values = r.turns.compactMap { $0.projected_ttft_ms[device] }.sorted()
        guard !values.isEmpty else { return "–" }
        return String(format: "%.0f", values[values.count / 2])
    }

    func row(_ r: ScenarioResult) -> [String] {
        ["\(r.scenario.group). \(r.scenario.name)", "\(r.turns.count)", "\(r.inputTokens)", "\(r.cachedTokens)",
         String(format: "%.0f%%", r.hitRate * 100), "\(r.recomputedTokens)", String(format: "%.0f", r.medianTTFT),
         String(format: "%.0f", r.worstTTFT), String(format: "%.0f", r.prefillTotal), relative(r)]
            + devices.map { projected(r, $0) }
    }

    var header: [String] { Self.columns + devices.map { "projected TTFT \($0) ms" } }

    func table() -> String {
        let rows = results.map(row)
        let widths = header.indices.map { i in ([header[i]] + rows.map { $0[i] }).map(\.count).max()! }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in
                i == 0 ? c.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[i] - c.count) + c
            }.joined(separator: "  ")
        }
        var out = [line(header), String(repeating: "─", count: widths.reduce(0, +) + 2 * (widths.count - 1))]
        for (r, cells) in zip(results, rows) {
            out.append(line(cells))
            out.append("    ↳ \(r.invalidationSummary)")
        }
        if !devices.isEmpty {
            out.append("")
            out.append("Projected TTFT columns are projections, not measurements: exact FLOP and byte counts of each")
            out.append("request divided by the device profiles in Models/devices/profiles.json (see README).")
        }
        return out.joined(separator: "\n")
    }

    func markdown() -> String {
        var out = ["| " + header.joined(separator: " | ") + " | what invalidated the cache |",
                   "|" + String(repeating: " --- |", count: header.count + 1)]
        for r in results { out.append("| " + row(r).joined(separator: " | ") + " | \(r.invalidationSummary) |") }
        return out.joined(separator: "\n")
    }

    func csv() -> String {
        var out = "scenario,turn,input_tokens,cached_tokens,output_tokens,prefill_ms,ttft_ms,invalidated_at,invalidated_segment,invalidation_reason"
            + devices.map { ",projected_ttft_ms_\($0)" }.joined() + "\n"
        for t in results.flatMap(\.turns) {
            let fields: [String] = [t.scenario, "\(t.turn)", "\(t.input_tokens)", "\(t.cached_tokens)", "\(t.output_tokens)",
                                    String(format: "%.3f", t.prefill_ms), String(format: "%.3f", t.ttft_ms),
                                    t.invalidated_at.map(String.init) ?? "", t.invalidated_segment ?? "",
                                    t.invalidation_reason ?? ""] + devices.map { t.projected_ttft_ms[$0].map { String(format: "%.3f", $0) } ?? "" }
            out += fields.map(TextTable.csvField).joined(separator: ",") + "\n"
        }
        return out
    }

    /// Per turn: a bar of reused (█) vs recomputed (░) tokens, scaled to the longest input.
    func timeline(_ r: ScenarioResult, width: Int = 60) -> String {
        let longest = max(1, r.turns.map(\.input_tokens).max() ?? 1)
        var out = ["", "\(r.scenario.name): reused █ vs recomputed ░ per turn (\(longest) tokens = \(width) columns)"]
        for t in r.turns {
            let reused = t.cached_tokens * width / longest
            let total = max(reused + 1, t.input_tokens * width / longest)
            let bar = String(repeating: "█", count: reused) + String(repeating: "░", count: total - reused)
            let note = t.invalidated_at.map { "  ✗ at \($0): \(t.invalidated_segment ?? "") (\(t.invalidation_reason ?? ""))" } ?? ""
            out.append(String(format: "turn %2d  ", t.turn) + bar.padding(toLength: width + 1, withPad: " ", startingAt: 0)
                + String(format: "%5d/%-5d TTFT %5.0f ms", t.cached_tokens, t.input_tokens, t.ttft_ms) + note)
        }
        return out.joined(separator: "\n")
    }
}
