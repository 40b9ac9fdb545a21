import Foundation
import LMRuntime
import LMSession
import LMTestSupport
import Testing

/// A saved transcript reads back as it was: every entry kind, awkward text, nested tool
/// arguments, structured responses and response formats, identifiers included.
struct TranscriptRoundTripTests {
    struct Maker {
        var rng: SeededGenerator

        mutating func int(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }

        mutating func text() -> String {
            let pieces = ["a", "Ünïcödé", "日本", "🙂", "\"", "\\", "\n", "\t", "\u{0}", "\u{1F}", " ", "}", "{\"x\":1}", "<|user|>", "\u{2028}"]
            return (0 ..< int(8)).map { _ in pieces[int(pieces.count)] }.joined()
        }

        mutating func content(depth: Int = 0) -> GeneratedContent {
            switch depth > 2 ? int(4) : int(6) {
            case 0: return GeneratedContent(kind: .null)
            case 1: return GeneratedContent(kind: .bool(int(2) == 0))
            case 2:
                let numbers: [Double] = [0, -1, 42, 3.25, -0.001, 1e20, 123_456_789, Double(int(1000)) / 8]
                return GeneratedContent(kind: .number(numbers[int(numbers.count)]))
            case 3: return GeneratedContent(kind: .string(text()))
            case 4: return GeneratedContent(kind: .array((0 ..< int(4)).map { _ in content(depth: depth + 1) }))
            default:
                var keys: [String] = []
                for _ in 0 ..< int(4) {
                    let key = "k\(int(50))" + text().prefix(3)
                    if !keys.contains(key) { keys.append(key) }
                }
                var properties: [String: GeneratedContent] = [:]
                for key in keys { properties[key] = content(depth: depth + 1) }
                return GeneratedContent(kind: .structure(properties: properties, orderedKeys: keys))
            }
        }

        static let schemas = [
            #"{"type":"object","title":"Plan","properties":{"days":{"type":"integer","minimum":1,"maximum":7},"note":{"type":"string","pattern":"[a-z]+"}},"required":["days"],"x-order":["days","note"]}"#,
            #"{"type":"array","items":{"type":"string","enum":["a","b"]},"minItems":1,"maxItems":3}"#,
        ]

        mutating func schema() -> GenerationSchema {
            try! JSONDecoder().decode(GenerationSchema.self, from: Data(Self.schemas[int(2)].utf8))
        }

        mutating func format() -> Transcript.ResponseFormat? {
            guard int(3) == 0 else { return nil }
            return Transcript.ResponseFormat(schema: schema(), isIncludedInPrompt: int(2) == 0)
        }

        mutating func metadata() -> [String: any ConvertibleToGeneratedContent] {
            var out: [String: any ConvertibleToGeneratedContent] = [:]
            for _ in 0 ..< int(3) { out["m\(int(9))" + text().prefix(2)] = content() }
            return out
        }

        mutating func segment() -> Transcript.Segment {
            let id = "segment-\(int(1000))" + text()
            return int(2) == 0 ? .text(.init(id: id, content: text())) : .structure(.init(id: id, source: "Plan", content: content()))
        }

        mutating func options() -> GenerationOptions {
            let modes: [GenerationOptions.SamplingMode?] = [nil, .greedy, .random(top: 1 + int(50), seed: UInt64(int(9))),
                                                            .random(probabilityThreshold: Double(1 + int(8)) / 8)]
            let calling: [GenerationOptions.ToolCallingMode?] = [nil, .allowed, .required, .disallowed]
            return GenerationOptions(samplingMode: modes[int(modes.count)], temperature: int(2) == 0 ? nil : Double(int(20)) / 8,
                                     maximumResponseTokens: int(2) == 0 ? nil : int(500), toolCallingMode: calling[int(calling.count)])
        }

        mutating func entry() -> Transcript.Entry {
            let id = "id-\(int(1_000_000))-" + text()
            switch int(6) {
            case 0:
                let tools = (0 ..< int(3)).map { i in
                    int(2) == 0 ? Transcript.ToolDefinition(name: "tool\(i)", description: text(), argumentsSchema: #"{"type":"object"}"#)
                        : Transcript.ToolDefinition(name: "tool\(i)", description: text(), parameters: schema())
                }
                return .instructions(.init(id: id, texts: (0 ..< int(4)).map { _ in text() }, toolDefinitions: tools))
            case 1: return .prompt(.init(id: id, text: text(), options: options(), responseFormat: format(), metadata: metadata()))
            case 2:
                let calls = (0 ..< 1 + int(3)).map { _ in
                    Transcript.ToolCall(id: "call-\(int(1000))" + text(), metadata: metadata(), toolName: "tool\(int(3))", arguments: content())
                }
                return .toolCalls(.init(id: id, calls: calls, tokenIDs: int(2) == 0 ? nil : (0 ..< int(6)).map { _ in int(4096) },
                                        assetIDs: (0 ..< int(3)).map { _ in "tokenizer:" + text() }))
            case 3:
                return int(2) == 0 ? .toolOutput(.init(id: id, toolName: "tool\(int(3))", text: text()))
                    : .toolOutput(.init(id: id, toolName: "tool\(int(3))", segments: (0 ..< int(3)).map { _ in segment() }))
            case 4:
                let structure = int(2) == 0 ? nil
                    : Transcript.StructuredSegment(id: "segment-" + text(), source: "Plan", content: content())
                return .response(.init(id: id, text: text(), tokenIDs: (0 ..< int(8)).map { _ in int(4096) }, structure: structure,
                                       assetIDs: (0 ..< int(3)).map { _ in "tokenizer:" + text() }, metadata: metadata()))
            default:
                return .reasoning(.init(id: id, metadata: metadata(), segments: (0 ..< int(3)).map { _ in segment() },
                                        signature: int(2) == 0 ? nil : Data((0 ..< int(9)).map { _ in UInt8(int(256)) })))
            }
        }
    }

    /// The mode became a struct with a `kind` (Apple's shape); saved options keep the form the
    /// earlier enum of the same three cases wrote, so older transcripts still read.
    @Test func toolCallingMode_keepsTheEncodingOfTheEarlierEnum() throws {
        for (mode, kind, json) in [(GenerationOptions.ToolCallingMode.allowed, GenerationOptions.ToolCallingMode.Kind.allowed, #"{"allowed":{}}"#),
                                   (.required, .required, #"{"required":{}}"#), (.disallowed, .disallowed, #"{"disallowed":{}}"#)] {
            #expect(mode.kind == kind)
            #expect(String(decoding: try JSONEncoder().encode(mode), as: UTF8.self) == json)
            let saved = #"{"maximumResponseTokens":9,"toolCallingMode":"# + json + "}"
            #expect(try JSONDecoder().decode(GenerationOptions.self, from: Data(saved.utf8))
                    == GenerationOptions(maximumResponseTokens: 9, toolCallingMode: mode))
        }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(GenerationOptions.ToolCallingMode.self, from: Data(#"{"sometimes":{}}"#.utf8)) }
    }

    @Test func transcript_jsonRoundTripsGeneratedTranscripts() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys   // dictionaries have no order of their own
        for seed in 0 ..< 200 as Range<UInt64> {
            var maker = Maker(rng: SeededGenerator(seed: seed))
            let transcript = Transcript(entries: (0 ..< maker.int(9)).map { _ in maker.entry() })
            let data = try encoder.encode(transcript)
            let back = try JSONDecoder().decode(Transcript.self, from: data)
            #expect(back == transcript, "seed \(seed)")
            #expect(back.map(\.id) == transcript.map(\.id), "seed \(seed): identifiers")
            // And the encoding itself is stable: encoding what was read gives the same bytes.
            #expect(try encoder.encode(back) == data, "seed \(seed)")
            if back != transcript { return }
        }
    }
}
