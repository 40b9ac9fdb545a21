import Foundation
import KVScenarios

/// Two line charts, hit rate and time to first token per turn, one series per scenario.
struct SVGChart {
    let results: [ScenarioResult]
    let panelWidth = 560.0, panelHeight = 300.0, margin = 56.0, legendWidth = 250.0

    static let palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                          "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
                          "#e6550d", "#31a354", "#756bb1", "#636363"]

    func render() -> String {
        let turns = max(1, results.map(\.turns.count).max() ?? 1)
        let maxTTFT = max(1, results.flatMap(\.turns).map(\.ttft_ms).max() ?? 1)
        let width = 2 * (panelWidth + margin) + legendWidth + margin, height = panelHeight + 2 * margin + 20
        var svg = ["<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">",
                   "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>"]
        svg += panel(x: margin, title: "Cache hit rate per turn", yLabel: "cached ÷ input tokens", turns: turns, yMax: 1,
                     tick: { String(format: "%.0f%%", $0 * 100) }, ticks: 4) { $0.input_tokens == 0 ? 0 : Double($0.cached_tokens) / Double($0.input_tokens) }
        // TTFT spans orders of magnitude (a full recompute near the window vs an append): log scale.
        let decades = max(1, ceil(log10(maxTTFT)))
        svg += panel(x: 2 * margin + panelWidth, title: "Time to first token per turn (log scale)", yLabel: "ms", turns: turns,
                     yMax: decades, tick: { String(format: "%.0f", pow(10, $0)) }, ticks: Int(decades)) { log10(max(1, $0.ttft_ms)) }
        let legendX = 2 * (margin + panelWidth) + 20
        for (i, r) in results.enumerated() {
            let y = margin + Double(i) * 16
            let color = Self.palette[i % Self.palette.count]
            svg.append("<line x1=\"\(legendX)\" y1=\"\(y)\" x2=\"\(legendX + 18)\" y2=\"\(y)\" stroke=\"\(color)\" stroke-width=\"3\"/>")
            svg.append("<text x=\"\(legendX + 24)\" y=\"\(y + 4)\">\(Self.escape("\(r.scenario.group). \(r.scenario.name)"))</text>")
        }
        svg.append("</svg>")
        return svg.joined(separator: "\n")
    }

    private func panel(x: Double, title: String, yLabel: String, turns: Int, yMax: Double, tick: (Double) -> String,
                       ticks: Int, value: (ScenarioTurn) -> Double) -> [String] {
        let top = margin, bottom = margin + panelHeight
        func px(_ turn: Int) -> Double { x + (turns == 1 ? panelWidth / 2 : Double(turn - 1) / Double(turns - 1) * panelWidth) }
        func py(_ v: Double) -> Double { bottom - min(1, v / yMax) * panelHeight }
        var out = ["<text x=\"\(x)\" y=\"\(top - 24)\" font-size=\"15\" font-weight=\"bold\">\(Self.escape(title))</text>",
                   "<text x=\"\(x - 44)\" y=\"\(top - 8)\" fill=\"#555\">\(Self.escape(yLabel))</text>"]
        for k in 0 ... ticks {
            let v = yMax * Double(k) / Double(ticks), y = py(v)
            out.append("<line x1=\"\(x)\" y1=\"\(y)\" x2=\"\(x + panelWidth)\" y2=\"\(y)\" stroke=\"#e5e5e5\"/>")
            out.append("<text x=\"\(x - 6)\" y=\"\(y + 4)\" text-anchor=\"end\" fill=\"#555\">\(tick(v))</text>")
        }
        for t in 1 ... turns {
            out.append("<text x=\"\(px(t))\" y=\"\(bottom + 18)\" text-anchor=\"middle\" fill=\"#555\">\(t)</text>")
        }
        out.append("<text x=\"\(x + panelWidth / 2)\" y=\"\(bottom + 38)\" text-anchor=\"middle\" fill=\"#555\">turn</text>")
        out.append("<line x1=\"\(x)\" y1=\"\(bottom)\" x2=\"\(x + panelWidth)\" y2=\"\(bottom)\" stroke=\"#333\"/>")
        for (i, r) in results.enumerated() {
            let color = Self.palette[i % Self.palette.count]
            let points = r.turns.map { "\(px($0.turn)),\(py(value($0)))" }.joined(separator: " ")
            out.append("<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(points)\"/>")
            for t in r.turns { out.append("<circle cx=\"\(px(t.turn))\" cy=\"\(py(value(t)))\" r=\"2.5\" fill=\"\(color)\"/>") }
        }
        return out
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
