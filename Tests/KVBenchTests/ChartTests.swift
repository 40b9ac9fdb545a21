import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
@testable import KVScenarios
import LMTestSupport
import Testing

/// The chart and the HTML report: structure, not pixels.
struct ChartTests {
    /// Reads the panels of a chart: their group and the full labels and series styles inside.
    final class PanelReader: NSObject, XMLParserDelegate {
        struct Panel {
            var group: Int
            var labels: [String] = []
            var legendStyles: [String] = []
        }

        var panels: [Panel] = []
        private var inPanel = false, inLabel = false
        private var text = ""

        func parser(_ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
                    attributes: [String: String] = [:]) {
            let cls = attributes["class"] ?? ""
            if element == "g", cls == "panel" {
                panels.append(Panel(group: Int(attributes["data-group"] ?? "") ?? -1))
                inPanel = true
            } else if inPanel, element == "text", cls == "label" {
                inLabel = true
                text = ""
            } else if inPanel, element == "line", cls.hasPrefix("s") {
                panels[panels.count - 1].legendStyles.append(cls)
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { if inLabel { text += string } }

        func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
            if element == "text", inLabel {
                panels[panels.count - 1].labels.append(text)
                inLabel = false
            } else if element == "g" {
                inPanel = false
            }
        }
    }

    static func results(turns: Int = 4) -> [ScenarioResult] {
        ScenarioCatalog.all.enumerated().map { index, scenario in
            ScenarioResult(scenario: scenario, turns: (1 ... turns).map { t in
                ScenarioTurn(scenario: scenario.name, turn: t, input_tokens: 100 * t, cached_tokens: t == 1 ? 0 : 90 * t - index,
                             cached_from_store: 0, cached_from_disk: 0, resident_mib: nil, output_tokens: 5,
                             prefill_ms: Double(10 + index * t), ttft_ms: Double(20 + 30 * index * t), invalidated_at: nil,
                             invalidated_segment: nil, invalidation_reason: nil, projected_ttft_ms: [:])
            })
        }
    }

    @Test func svgChart_parsesWithOnePanelPerGroupAndEveryScenarioLabelledInFull() throws {
        let svg = SVGChart(results: Self.results()).render()
        let parser = XMLParser(data: Data(svg.utf8))
        let reader = PanelReader()
        parser.delegate = reader
        #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
        let groups = Set(ScenarioCatalog.all.map(\.group)).sorted()
        #expect(reader.panels.map(\.group) == groups)
        for panel in reader.panels {
            let members = ScenarioCatalog.all.filter { $0.group == panel.group }
            #expect(panel.labels == members.map { "\($0.group). \($0.name)" })
            // The group's scenarios get distinct colours.
            #expect(Set(panel.legendStyles).count == members.count, "group \(panel.group): \(panel.legendStyles)")
        }
        #expect(svg.contains("@media (prefers-color-scheme: dark)"))
        #expect(svg.contains("class=\"baseline\""))   // the baseline drawn in the other panels
    }

    @Test func svgChart_escapesTextAndCopesWithOneTurn() throws {
        let svg = SVGChart(results: Self.results(turns: 1)).render()
        let parser = XMLParser(data: Data(svg.utf8))
        #expect(parser.parse())
        #expect(!svg.contains("nan") && !svg.contains("inf"))
    }

    @Test func htmlReport_holdsTheMachineTableChartAndInvalidations() throws {
        let html = Fixtures.temporaryFile("report.html")
        defer { try? FileManager.default.removeItem(at: html) }
        let run = try KVBenchTests.run(["scenarios", "--model", "tiny", "--turns", "2", "--response-tokens", "3",
                                        "--scenario", "stable-append", "--scenario", "changing-top", "--html", html.path])
        #expect(run.status == 0, "\(run.stderr)")
        let page = try String(contentsOf: html, encoding: .utf8)
        #expect(page.hasPrefix("<!doctype html>") && page.contains("</html>"))
        #expect(page.contains("OpenBLAS core type") && page.contains("cores"))
        #expect(page.contains("<td>1. stable-append</td>") && page.contains("<td>2. changing-top</td>"))
        #expect(page.contains("instructions (text 0)"))   // what invalidated changing-top's cache
        #expect(page.contains("<svg") && page.contains("class=\"panel\" data-group=\"2\""))
        #expect(page.contains("prefers-color-scheme: dark"))
    }
}
