import Foundation

/// Rows under a header, written as an aligned text table, Markdown or CSV.
struct TextTable {
    let header: [String]
    let rows: [[String]]

    /// The table in `format` (`table`, `markdown` or `csv`; anything else is the aligned table).
    func render(_ format: OutputFormat) -> String {
        switch format {
        case .markdown:
            return (["| " + header.joined(separator: " | ") + " |", "|" + String(repeating: " --- |", count: header.count)]
                + rows.map { "| " + $0.joined(separator: " | ") + " |" }).joined(separator: "\n")
        case .csv:
            return ([header] + rows).map { $0.map(Self.csvField).joined(separator: ",") }.joined(separator: "\n")
        default:
            let widths = header.indices.map { i in ([header[i]] + rows.map { $0[i] }).map(\.count).max()! }
            func line(_ cells: [String]) -> String {
                cells.enumerated().map { i, c in
                    i == 0 ? c.padding(toLength: widths[i], withPad: " ", startingAt: 0) : String(repeating: " ", count: widths[i] - c.count) + c
                }.joined(separator: "  ")
            }
            return ([line(header), String(repeating: "─", count: widths.reduce(0, +) + 2 * (widths.count - 1))] + rows.map(line))
                .joined(separator: "\n")
        }
    }

    /// A CSV field, quoted when it holds a comma, quote or newline.
    static func csvField(_ s: String) -> String {
        s.contains(where: { ",\"\n".contains($0) }) ? "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : s
    }
}
