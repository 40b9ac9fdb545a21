import Foundation

/// Small multiples: one panel per scenario group, holding the group's scenarios side by side
/// (hit rate and time to first token per turn, on scales every panel shares) and a bar per
/// scenario of its total prefill time against the baseline's. Colours come from a style sheet
/// with a `prefers-color-scheme: dark` variant.
package struct SVGChart {
    /// The scenarios to draw, in table order.
    package let results: [ScenarioResult]

    /// A chart of `results`.
    package init(results: [ScenarioResult]) { self.results = results }

    static let width = 1280.0, columns = 2, margin = 20.0, header = 64.0
    static let panelWidth = (width - 3 * margin) / 2, plotWidth = 245.0, plotHeight = 118.0
    static let baselineName = "stable-append"

    /// Series colours per position in a group (groups hold at most four scenarios), light and dark.
    static let series = [("#1f6fb4", "#6cb6ff"), ("#d1495b", "#ff8182"), ("#2f9e44", "#7ee787"), ("#9c6ade", "#d2a8ff")]

    private var groups: [(group: Int, results: [ScenarioResult])] {
        Dictionary(grouping: results, by: \.scenario.group).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    private var baseline: ScenarioResult? { results.first { $0.scenario.name == Self.baselineName } }

    /// The chart as one SVG document.
    package func render() -> String {
        let groups = self.groups
        let panelHeights = groups.map { 46 + Self.plotHeight + 50 + Double($0.results.count) * 18 }
        let rows = stride(from: 0, to: groups.count, by: Self.columns).map { panelHeights[$0 ..< min($0 + Self.columns, groups.count)].max()! }
        let height = Self.header + rows.reduce(0, +) + Double(rows.count) * Self.margin
        let scales = Scales(turns: max(1, results.map(\.turns.count).max() ?? 1),
                            ttftDecades: max(1, ceil(log10(max(10, results.flatMap(\.turns).map(\.ttft_ms).max() ?? 10)))),
                            prefillMax: max(1, results.map(\.prefillTotal).max() ?? 1))
        var svg = ["<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(Self.width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(Self.width)) \(Int(height))\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">",
                   "<style>", Self.styleSheet, "</style>",
                   "<rect class=\"bg\" width=\"100%\" height=\"100%\"/>",
                   "<text x=\"\(Self.margin)\" y=\"28\" font-size=\"17\" font-weight=\"bold\">KV-cache reuse per scenario group: hit rate and time to first token per turn</text>",
                   "<text class=\"muted\" x=\"\(Self.margin)\" y=\"48\">Scales are shared by every panel (TTFT on a log scale). Dashed grey: the baseline, 1. \(Self.baselineName). Bars: total prefill time per scenario.</text>"]
        var y = Self.header
        for (row, rowHeight) in rows.enumerated() {
            for column in 0 ..< Self.columns where row * Self.columns + column < groups.count {
                let g = groups[row * Self.columns + column]
                svg += panel(group: g.group, results: g.results, x: Self.margin + Double(column) * (Self.panelWidth + Self.margin),
                             y: y, height: rowHeight, scales: scales)
            }
            y += rowHeight + Self.margin
        }
        svg.append("</svg>")
        return svg.joined(separator: "\n")
    }

    struct Scales {
        let turns: Int
        let ttftDecades: Double
        let prefillMax: Double
    }

    private func panel(group: Int, results: [ScenarioResult], x: Double, y: Double, height: Double, scales: Scales) -> [String] {
        var out = ["<g class=\"panel\" data-group=\"\(group)\">",
                   "<rect class=\"frame\" x=\"\(x)\" y=\"\(y)\" width=\"\(Self.panelWidth)\" height=\"\(height)\" rx=\"6\"/>",
                   "<text x=\"\(x + 12)\" y=\"\(y + 20)\" font-size=\"14\" font-weight=\"bold\">\(Self.escape("\(group). \(ScenarioCatalog.groupTitle(group))"))</text>"]
        let top = y + 46
        let showBaseline = group != 1 ? baseline : nil
        let hit: (ScenarioTurn) -> Double = { $0.input_tokens == 0 ? 0 : Double($0.cached_tokens) / Double($0.input_tokens) }
        let ttft: (ScenarioTurn) -> Double = { log10(max(1, $0.ttft_ms)) / scales.ttftDecades }
        out += plot(x: x + 52, top: top, title: "cache hit rate", results: results, baseline: showBaseline, scales: scales,
                    ticks: (0 ... 4).map { (Double($0) / 4, "\($0 * 25)%") }, value: hit)
        out += plot(x: x + 52 + Self.plotWidth + 62, top: top, title: "time to first token, ms", results: results,
                    baseline: showBaseline, scales: scales,
                    ticks: (0 ... Int(scales.ttftDecades)).map { (Double($0) / scales.ttftDecades, Self.thousands(pow(10, Double($0)))) },
                    value: ttft)
        // Legend with full names, and each scenario's total prefill time as a bar.
        let base = baseline?.prefillTotal
        for (i, r) in results.enumerated() {
            let ly = top + Self.plotHeight + 50 + Double(i) * 18
            let barX = x + 262, barWidth = 150 * r.prefillTotal / scales.prefillMax
            var note = "\(Self.thousands(r.prefillTotal)) ms prefill"
            if let base, base > 0, r.scenario.name != Self.baselineName { note += String(format: " · %.1f× baseline", r.prefillTotal / base) }
            out += ["<line class=\"s\(i)\" x1=\"\(x + 12)\" y1=\"\(ly - 4)\" x2=\"\(x + 32)\" y2=\"\(ly - 4)\" stroke-width=\"3\"/>",
                    "<text class=\"label\" x=\"\(x + 38)\" y=\"\(ly)\">\(Self.escape("\(r.scenario.group). \(r.scenario.name)"))</text>",
                    "<rect class=\"f\(i)\" x=\"\(barX)\" y=\"\(ly - 10)\" width=\"\(max(1, barWidth))\" height=\"10\"/>",
                    "<text class=\"muted\" x=\"\(barX + max(1, barWidth) + 6)\" y=\"\(ly)\" font-size=\"11\">\(Self.escape(note))</text>"]
        }
        out.append("</g>")
        return out
    }

    private func plot(x: Double, top: Double, title: String, results: [ScenarioResult], baseline: ScenarioResult?, scales: Scales,
                      ticks: [(Double, String)], value: (ScenarioTurn) -> Double) -> [String] {
        let bottom = top + Self.plotHeight, w = Self.plotWidth
        func px(_ turn: Int) -> Double { x + (scales.turns == 1 ? w / 2 : Double(turn - 1) / Double(scales.turns - 1) * w) }
        func py(_ v: Double) -> Double { bottom - max(0, min(1, v)) * Self.plotHeight }
        var out = ["<text class=\"muted\" x=\"\(x)\" y=\"\(top - 8)\">\(Self.escape(title))</text>"]
        for (v, label) in ticks {
            out.append("<line class=\"grid\" x1=\"\(x)\" y1=\"\(py(v))\" x2=\"\(x + w)\" y2=\"\(py(v))\"/>")
            out.append("<text class=\"muted\" x=\"\(x - 6)\" y=\"\(py(v) + 4)\" text-anchor=\"end\" font-size=\"11\">\(label)</text>")
        }
        out.append("<line class=\"axis\" x1=\"\(x)\" y1=\"\(bottom)\" x2=\"\(x + w)\" y2=\"\(bottom)\"/>")
        let step = max(1, scales.turns / 8)
        for t in stride(from: 1, through: scales.turns, by: step) {
            out.append("<text class=\"muted\" x=\"\(px(t))\" y=\"\(bottom + 14)\" text-anchor=\"middle\" font-size=\"11\">\(t)</text>")
        }
        out.append("<text class=\"muted\" x=\"\(x + w / 2)\" y=\"\(bottom + 28)\" text-anchor=\"middle\" font-size=\"11\">turn</text>")
        func series(_ r: ScenarioResult, line: String, dot: String?) -> [String] {
            let points = r.turns.map { "\(px($0.turn)),\(py(value($0)))" }.joined(separator: " ")
            var s = ["<polyline class=\"\(line)\" fill=\"none\" stroke-width=\"2\" points=\"\(points)\"/>"]
            if let dot { s += r.turns.map { "<circle class=\"\(dot)\" cx=\"\(px($0.turn))\" cy=\"\(py(value($0)))\" r=\"2.5\"/>" } }
            return s
        }
        if let baseline { out += series(baseline, line: "baseline", dot: nil) }
        for (i, r) in results.enumerated() { out += series(r, line: "s\(i)", dot: "dot\(i)") }
        return out
    }

    static var styleSheet: String {
        let light = series.enumerated().map { "--s\($0.offset): \($0.element.0);" }.joined(separator: " ")
        let dark = series.enumerated().map { "--s\($0.offset): \($0.element.1);" }.joined(separator: " ")
        let classes = series.indices.map { ".s\($0) { stroke: var(--s\($0)); } .dot\($0), .f\($0) { fill: var(--s\($0)); }" }
        return """
            svg { --bg: #ffffff; --panel: #f7f8fa; --fg: #1b1f24; --muted: #57606a; --grid: #e4e7eb; --axis: #6e7781; --base: #9aa0a6; \(light) }
            @media (prefers-color-scheme: dark) {
              svg { --bg: #0d1117; --panel: #161b22; --fg: #e6edf3; --muted: #9198a1; --grid: #2a313c; --axis: #8b949e; --base: #6e7681; \(dark) }
            }
            .bg { fill: var(--bg); } .frame { fill: var(--panel); stroke: var(--grid); }
            text { fill: var(--fg); } text.muted { fill: var(--muted); }
            .grid { stroke: var(--grid); } .axis { stroke: var(--axis); }
            .baseline { stroke: var(--base); stroke-dasharray: 5 4; }
            \(classes.joined(separator: "\n"))
            """
    }

    /// `1234.5` → `1,235`.
    static func thousands(_ value: Double) -> String {
        let digits = String(Int(value.rounded()))
        return digits.reversed().enumerated().reduce(into: "") { out, pair in
            if pair.offset > 0, pair.offset % 3 == 0 { out.append(",") }
            out.append(pair.element)
        }.reversed().map(String.init).joined()
    }

    /// `s` with the characters XML gives meaning to escaped.
    package static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
