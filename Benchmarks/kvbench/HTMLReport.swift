import Foundation
import KVScenarios

/// One self-contained HTML page for a `kvbench scenarios` run: the machine, the command, the
/// table with what invalidated each scenario's cache, and the chart, to attach to a bug report
/// or to compare with another machine's run.
struct HTMLReport {
    let report: ScenarioReport
    let machine: MachineInfo
    let command: String
    var date = Date()

    func render() -> String {
        let e = SVGChart.escape
        let header = report.header.map { "<th>\(e($0))</th>" }.joined() + "<th>what invalidated the cache</th>"
        let rows = report.results.map { r in
            "<tr>" + report.row(r).map { "<td>\(e($0))</td>" }.joined() + "<td class=\"why\">\(e(r.invalidationSummary))</td></tr>"
        }
        let stamp = ISO8601DateFormatter().string(from: date)
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>kvbench scenarios — \(e(machine.cpu))</title>
            <style>
            :root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #57606a; --line: #d0d7de; --stripe: #f6f8fa; }
            @media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --line: #30363d; --stripe: #161b22; } }
            body { font: 14px/1.45 -apple-system, Helvetica, Arial, sans-serif; color: var(--fg); background: var(--bg); margin: 24px; }
            table { border-collapse: collapse; margin: 16px 0; font-variant-numeric: tabular-nums; }
            th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: right; vertical-align: top; }
            th:first-child, td:first-child, td.why { text-align: left; }
            td.why { color: var(--muted); max-width: 36em; }
            tr:nth-child(even) td { background: var(--stripe); }
            .muted { color: var(--muted); }
            svg { max-width: 100%; height: auto; }
            </style>
            </head>
            <body>
            <h1>kvbench scenarios</h1>
            <p><b>Machine:</b> \(e(machine.summary))<br><span class="muted">\(e(machine.os))</span></p>
            <p><b>Command:</b> <code>kvbench \(e(command))</code><br><span class="muted">run \(stamp)</span></p>
            <table>
            <tr>\(header)</tr>
            \(rows.joined(separator: "\n"))
            </table>
            <p class="muted">Hit rate = cached ÷ input tokens. Times are measured on this machine in this run; projected columns
            are projections from exact FLOP and byte counts and the device profiles, not measurements.</p>
            \(SVGChart(results: report.results).render())
            </body>
            </html>
            """
    }
}
