import Foundation
import LMRuntime
@testable import LMSession
import LMTestSupport
import Synchronization
import Testing

@Suite struct GeneratedContentTests {
    @Test func jsonString_roundTripsThroughInitJSON_keepingKeyOrder() throws {
        let text = #"{"z":1,"a":[true,null,"x\"y\\n"],"m":{"k":-2.5,"e":[]},"u":"é😀\n"}"#
        let content = try GeneratedContent(json: text)
        #expect(content.jsonString == text)
        guard case let .structure(_, keys) = content.kind else { Issue.record("not a structure"); return }
        #expect(keys == ["z", "a", "m", "u"])
        #expect(try content.value(Int.self, forProperty: "z") == 1)
        #expect(try content.value(String?.self, forProperty: "missing") == nil)
        #expect(throws: GeneratedContentError.missingProperty("missing")) { try content.value(Int.self, forProperty: "missing") }
        #expect(throws: GeneratedContentError.self) { try content.value(Int.self, forProperty: "u") }
    }

    @Test func initJSON_malformedText_throwsNamingTheByte() {
        // Numbers beyond Double's range too (they would read as infinity, which JSON cannot write
        // back; found by the generated-content fuzz target against Foundation's reader), also
        // while a partial number is still growing.
        let malformed = [("{\"a\":}", 5), ("[1,]", 3), ("01", 0), ("{} x", 3), ("tru", 3), ("[1 2]", 3), ("", 0), ("[01", 1), ("{\"n\":1.2.", 5),
                         ("[4e999]", 1), ("-1e400", 0), ("{\"n\":" + String(repeating: "9", count: 400), 5)]
        // Text that stops short is malformed only where it must be whole.
        let cut = [("\"abc", 4), ("{\"a\":[1,", 8), ("-", 0)]
        func expectRefused(_ text: String, at offset: Int, whole: Bool) {
            do {
                _ = whole ? try GeneratedContent(wholeJSON: text) : try GeneratedContent(json: text)
                Issue.record("\(text) was accepted")
            } catch let GeneratedContentError.invalidJSON(at, _) {
                #expect(at == offset, "\(text)")
            } catch { Issue.record("\(error)") }
        }
        for (text, offset) in malformed {
            expectRefused(text, at: offset, whole: false)
            expectRefused(text, at: offset, whole: true)
        }
        for (text, offset) in cut { expectRefused(text, at: offset, whole: true) }
    }

    /// As Foundation Models documents it: `init(json:)` reads text that stops short, as a partly
    /// generated response does; saved content and tool arguments are read whole.
    @Test func initJSON_textThatStopsShort_readsAsIncompleteContent() throws {
        let idea = try GeneratedContent(json: #"{"title": "A story of"#)
        #expect(try idea.value(String.self, forProperty: "title") == "A story of")
        #expect(idea.isComplete == false)
        #expect(try GeneratedContent(json: #"{"n": [1, 2"#).value([Int].self, forProperty: "n") == [1, 2])
        #expect(try GeneratedContent(json: "-1.5e").value(Double.self) == -1.5)
        #expect(try GeneratedContent(json: #" {"a": 1} "#).isComplete)
        let saved = try JSONEncoder().encode(["content": #"{"title":"A story of"#])
        #expect(throws: GeneratedContentError.self) { try JSONDecoder().decode([String: GeneratedContent].self, from: saved) }
    }

    @Test func initJSON_escapes_joinSurrogatePairsAndRefuseMalformedDigits() throws {
        for (text, expected) in [(#""\ud83d\ude00 \u00E9\/\b\f""#, "😀 é/\u{8}\u{C}"),
                                 (#""\ud83d x""#, "\u{FFFD} x"),            // a high half alone
                                 (#""\ud83d\u0041""#, "\u{FFFD}A"),         // followed by no low half
                                 (#""\ude00\ud83d""#, "\u{FFFD}\u{FFFD}")] {  // halves in the wrong order
            #expect(try String(GeneratedContent(json: text)) == expected, "\(text)")
        }
        for text in [#""\u12""#, #""\u+123""#, #""\u12g4""#, #""\ud83d\uzz00""#, #""\x""#] {
            #expect(throws: GeneratedContentError.self, "\(text)") { try GeneratedContent(json: text) }
        }
        // Cut inside an escape, a partial read keeps what came before it.
        for cut in [#""ab\"#, #""ab\u00"#, #""ab\ud83d\u"#] {
            let partial = try #require(try GeneratedContent.partial(json: Array(cut.utf8)))
            #expect(try String(partial).hasPrefix("ab") && partial.isComplete == false, "\(cut)")
        }
    }

    @Test func initProperties_uniquingKeys_combinesRepeatedNamesInTheirFirstPlace() throws {
        let pairs: [(String, any ConvertibleToGeneratedContent)] = [("tags", ["a"]), ("n", 1), ("tags", ["b", "c"]), ("n", 2)]
        let merged = GeneratedContent(properties: pairs) { earlier, later in
            GeneratedContent(kind: earlier.kind == later.kind ? earlier.kind : .array([earlier, later]))
        }
        #expect(merged.jsonString == #"{"tags":[["a"],["b","c"]],"n":[1,2]}"#)
        let summed = try GeneratedContent(properties: pairs.filter { $0.0 == "n" }, id: GenerationID()) { a, b in
            try a.value(Int.self) + b.value(Int.self)
        }
        #expect(summed.jsonString == #"{"n":3}"# && summed.id != nil)
        struct Refused: Error {}
        #expect(throws: Refused.self) { try GeneratedContent(properties: pairs) { _, _ -> Int in throw Refused() } }
    }

    /// Content nests at most 64 levels: at the limit it reads, renders, compares and round-trips
    /// through Codable on a 512 KiB stack (192 levels overflowed one while reading); deeper text
    /// is rejected with a typed error naming the limit, not recursed into.
    @Test func initJSON_deepNesting_isRejectedNotRecursedInto() {
        let nested = { (levels: Int) in   // an object holding an array, and so on: `levels` levels
            String(repeating: #"{"a":["#, count: levels / 2) + (levels % 2 == 1 ? "[1]" : "1") + String(repeating: "]}", count: levels / 2)
        }
        let texts = [nested(64), nested(65), String(repeating: "[", count: 100_000)]
        let outcomes = Mutex<[String]>([])
        onSmallStack {
            for text in texts {
                do {
                    let content = try GeneratedContent(json: text)
                    let decoded = try JSONDecoder().decode(GeneratedContent.self, from: JSONEncoder().encode(content))
                    let same = content.jsonString == text && decoded == content && content.debugDescription.count >= text.count
                    outcomes.withLock { $0.append(same ? "read" : "changed") }
                } catch let GeneratedContentError.invalidJSON(_, reason) {
                    outcomes.withLock { $0.append(reason) }
                } catch { outcomes.withLock { $0.append("\(error)") } }
            }
        }
        #expect(outcomes.withLock { $0 } == ["read", "nesting deeper than 64", "nesting deeper than 64"])
    }

    @Test func partial_everyPrefixOfAValue_readsAsIncompleteContent() throws {
        let text = #"{"title":"Hello world","steps":["a","bc"],"n":12.5,"ok":true,"none":null}"#
        let whole = try GeneratedContent(json: text)
        let bytes = Array(text.utf8)
        var previousKeys = 0
        for end in 0 ... bytes.count {
            let partial = try GeneratedContent.partial(json: Array(bytes[..<end]))
            if end == bytes.count { #expect(partial == whole) } else { #expect(partial?.isComplete != true) }
            if case let .structure(_, keys)? = partial?.kind {
                // Properties only ever appear, in order, never disappear.
                #expect(keys.count >= previousKeys)
                previousKeys = keys.count
            }
        }
        let cut = try #require(try GeneratedContent.partial(json: Array(#"{"title":"Hel"#.utf8)))
        #expect(try cut.value(String.self, forProperty: "title") == "Hel")
    }

    @Test func standardTypes_convertBothWays() throws {
        #expect(try Int(GeneratedContent(json: "42")) == 42)
        #expect(throws: GeneratedContentError.self) { try Int(GeneratedContent(json: "4.5")) }
        #expect(try Double(GeneratedContent(json: "-0.25")) == -0.25)
        #expect(try Decimal(GeneratedContent(json: "0.1")) == Decimal(string: "0.1"))
        #expect(try [Bool](GeneratedContent(json: "[true,false]")) == [true, false])
        #expect(try String?(GeneratedContent(json: "null")) == nil)
        #expect([1, 2].generatedContent.jsonString == "[1,2]")
        #expect(Optional<String>.none.generatedContent.jsonString == "null")
        #expect("plain".promptRepresentation.text == "plain")
        #expect(GeneratedContent(properties: ["b": 1, "a": "x"]).jsonString == #"{"b":1,"a":"x"}"#)
    }

    @Test func codable_savesContentAsItsJSON() throws {
        let content = try GeneratedContent(json: #"{"a":[1,"two"]}"#)
        let data = try JSONEncoder().encode([content])
        #expect(try JSONDecoder().decode([GeneratedContent].self, from: data) == [content])
    }
}

@Suite struct GenerationSchemaTests {
    @Test func codable_roundTripsAsJSONSchemaKeepingOrderAndGuides() throws {
        let schema = AISummary.generationSchema
        let data = try JSONEncoder().encode(schema)
        let decoded = try JSONDecoder().decode(GenerationSchema.self, from: data)
        #expect(decoded.root == schema.root)
        let json = String(decoding: data, as: UTF8.self)
        #expect(json.contains("\"x-order\":[\"overallInsight\",\"recommendations\",\"confidence\",\"mood\",\"note\"]"))
        #expect(json.contains("\"minItems\":2") && json.contains("\"maxItems\":3"))
    }

    @Test func dynamicSchema_resolvesReferencesAndReportsProblems() throws {
        let item = DynamicGenerationSchema(name: "Item", properties: [
            .init(name: "name", schema: .init(type: String.self)),
            .init(name: "size", schema: .init(type: Int.self, guides: [.range(1 ... 3)])),
        ])
        let root = DynamicGenerationSchema(name: "Order", properties: [
            .init(name: "items", schema: .init(arrayOf: .init(referenceTo: "Item"), minimumElements: 1, maximumElements: 2)),
            .init(name: "express", schema: .init(name: "Speed", anyOf: ["yes", "no"]), isOptional: true),
        ])
        let schema = try GenerationSchema(root: root, dependencies: [item])
        #expect(schema.debugDescription == #"{"items": [{"name": string, "size": integer 1...3}] (1...2 items), "express": "yes" | "no" or null}"#)
        #expect(throws: GenerationSchema.SchemaError.undefinedReferences(schema: nil, references: ["Item"])) {
            try GenerationSchema(root: .init(referenceTo: "Item"), dependencies: [])
        }
        let loop = DynamicGenerationSchema(name: "Node", properties: [.init(name: "next", schema: .init(referenceTo: "Node"))])
        #expect(throws: GenerationSchema.SchemaError.recursiveReference("Node")) {
            try GenerationSchema(root: .init(referenceTo: "Node"), dependencies: [loop])
        }
        #expect(throws: GenerationSchema.SchemaError.duplicateProperty(schema: "D", property: "a")) {
            try GenerationSchema(root: .init(name: "D", properties: [.init(name: "a", schema: .init(type: Int.self)),
                                                                      .init(name: "a", schema: .init(type: Int.self))]), dependencies: [])
        }
    }

    /// A dynamic schema of `levels` levels: structures around an integer (the last level).
    static func nested(_ levels: Int) -> DynamicGenerationSchema {
        (1 ..< levels).reduce(DynamicGenerationSchema(type: Int.self)) { inner, _ in
            DynamicGenerationSchema(name: "Level", properties: [.init(name: "inner", schema: inner)])
        }
    }

    /// The JSON Schema text of `nested(levels)`, written by hand (the encoder writes only schemas within the limit).
    static func nestedJSON(_ levels: Int) -> String {
        String(repeating: #"{"type":"object","title":"Level","properties":{"inner":"#, count: levels - 1) + #"{"type":"integer"}"#
            + String(repeating: "}}", count: levels - 1)
    }

    /// Schemas nested deeper than ``GenerationSchema/nestingLimit`` are refused with a typed error
    /// on every way in (built at run time, decoded from JSON inside another document, put together
    /// from nodes), on a 512 KiB stack and without recursing through the levels beyond: before the
    /// limit, about 110 levels of structures overflowed such a stack while compiling. A schema at
    /// the limit builds, renders, encodes, decodes and compiles there.
    @Test func nestingLimit_deeperSchemas_areTypedErrorsOnEveryPathOnASmallStack() throws {
        let limit = GenerationSchema.nestingLimit
        struct Mismatch: Error {}   // (no #expect on a thread of its own: outcomes are collected instead)
        let outcomes = Mutex<[String]>([])
        onSmallStack {
            func record(_ label: String, _ body: () throws -> Void) {
                let outcome: String
                do {
                    try body()
                    outcome = "ok"
                } catch let error as GenerationSchema.SchemaError where error == .nestedTooDeep {
                    outcome = "too deep"
                } catch { outcome = "\(error)" }
                outcomes.withLock { $0.append("\(label): \(outcome)") }
            }
            let vocabulary = ConstrainedDecodingPropertyTests.vocabulary
            for levels in [limit, limit + 1, 200] {
                record("dynamic \(levels)") {
                    let schema = try GenerationSchema(root: Self.nested(levels), dependencies: [])
                    _ = try SchemaGrammar(schema, vocabulary: vocabulary)
                    // Encoded, then decoded three keys down in another document.
                    let document = try JSONEncoder().encode(["a": [["schema": schema]]])
                    let decoded = try JSONDecoder().decode([String: [[String: GenerationSchema]]].self, from: document)
                    guard decoded["a"]?[0]["schema"] == schema, schema.debugDescription.count > 10 * limit else { throw Mismatch() }
                }
                record("JSON \(levels)") {
                    let document = #"{"a":[{"schema":"# + Self.nestedJSON(levels) + "}]}"
                    let decoded = try JSONDecoder().decode([String: [[String: GenerationSchema]]].self, from: Data(document.utf8))
                    guard decoded["a"]?[0]["schema"] == (try GenerationSchema(root: Self.nested(levels), dependencies: [])) else { throw Mismatch() }
                }
                record("nodes \(levels)") {
                    let node = (1 ..< levels).reduce(SchemaNode.number(minimum: nil, maximum: nil, integral: true)) { inner, _ in
                        .object(name: "Level", description: nil, properties: [SchemaProperty(name: "inner", description: nil, node: inner, isOptional: false)])
                    }
                    let schema = GenerationSchema(root: node)
                    // Beyond the limit the schema keeps only its name, so nothing walks the deep tree again.
                    guard schema.problem == nil || schema.root == .object(name: "Level", description: nil, properties: []) else { throw Mismatch() }
                    _ = try SchemaGrammar(schema, vocabulary: vocabulary)
                }
            }
        }
        #expect(outcomes.withLock { $0 } == [limit, limit + 1, 200].flatMap { levels in
            ["dynamic", "JSON", "nodes"].map { "\($0) \(levels): \(levels > limit ? "too deep" : "ok")" }
        })
    }

    /// References that double at every level (a schema with two properties of the next schema,
    /// which has two of the next...) are refused once ``GenerationSchema/valueLimit`` values have
    /// been expanded, not expanded: 30 levels would be two thousand million values. Within the
    /// limit they expand as before; a node shared the same way is measured without expanding it.
    @Test func valueLimit_referencesThatDoubleAtEveryLevel_areRefusedBeforeExpanding() throws {
        func doubling(_ levels: Int) -> [DynamicGenerationSchema] {
            (0 ..< levels).map { i in
                DynamicGenerationSchema(name: "L\(i)", properties: ["a", "b"].map {
                    .init(name: $0, schema: i + 1 < levels ? .init(referenceTo: "L\(i + 1)") : .init(type: Bool.self))
                })
            }
        }
        let within = try GenerationSchema(root: .init(referenceTo: "L0"), dependencies: doubling(8))   // 511 values
        #expect(within.debugDescription.components(separatedBy: "boolean").count - 1 == 256)
        _ = try SchemaGrammar(within, vocabulary: ConstrainedDecodingPropertyTests.vocabulary)
        for levels in [13, 30] {   // 16,383 and 2,147,483,647 values
            #expect(throws: GenerationSchema.SchemaError.tooManyValues) {
                try GenerationSchema(root: .init(referenceTo: "L0"), dependencies: doubling(levels))
            }
        }
        let shared = (0 ..< 30).reduce(SchemaNode.boolean) { inner, _ in
            .object(name: "D", description: nil, properties: ["a", "b"].map { SchemaProperty(name: $0, description: nil, node: inner, isOptional: false) })
        }
        let schema = GenerationSchema(root: shared)
        #expect(schema.problem == .tooManyValues && schema.root == .object(name: "D", description: nil, properties: []))
        #expect(throws: GenerationSchema.SchemaError.tooManyValues) { try SchemaGrammar(schema, vocabulary: ConstrainedDecodingPropertyTests.vocabulary) }
    }

    @Test func patternGuide_unsupportedConstructs_areTypedErrors() {
        for (pattern, word) in [("(a)\\1", "backreferences"), ("(?=a)b", "lookaround"), ("a{1,500}", "repetition"), ("[", "unclosed"), ("\u{01}+", "matches no string"),
                                ("(ab|" + String(repeating: ".", count: 127) + "c)+[x-z]?\\s\\w{0,4}", "too large to build")] {
            do {
                _ = try PatternAutomaton(pattern)
                Issue.record("/\(pattern)/ was accepted")
            } catch let GenerationSchema.SchemaError.unsupportedPattern(p, reason) {
                #expect(p == pattern && reason.contains(word), "\(reason)")
            } catch { Issue.record("\(error)") }
        }
    }

    /// Groups nest at most 32 deep in a pattern: at the limit a pattern builds and matches on a
    /// 512 KiB stack (200 nested groups overflowed one while parsing); deeper ones are refused
    /// with a typed error naming the limit, not recursed into. Nested repetitions, which copy what
    /// they repeat, are refused once the copies pass the construction's state limit, rather than
    /// made: 20 nested `+` would be a million copies, three nested `{64}` a quarter of a million.
    @Test func patternGuide_nestedGroups_buildToTheLimitOnASmallStack() {
        let groups = { (n: Int) in String(repeating: "(", count: n) + "ab|c" + String(repeating: ")", count: n) + "+" }
        let patterns = [groups(PatternParser.groupDepthLimit), groups(PatternParser.groupDepthLimit + 1), groups(5_000),
                        String(repeating: "(", count: 20) + "ab|c" + String(repeating: ")+", count: 20), "((a{64}){64}){64}"]
        let outcomes = Mutex<[String]>([])
        onSmallStack {
            for pattern in patterns {
                do {
                    let automaton = try PatternAutomaton(pattern)
                    outcomes.withLock { $0.append("\(automaton.matches("abcab")) \(automaton.matches("abd"))") }
                } catch let GenerationSchema.SchemaError.unsupportedPattern(_, reason) {
                    outcomes.withLock { $0.append(reason) }
                } catch { outcomes.withLock { $0.append("\(error)") } }
            }
        }
        let tooLarge = "its automaton is too large to build (over \(PatternAutomaton.maximumNFAStates) NFA states)"
        #expect(outcomes.withLock { $0 } == ["true false", "groups nested deeper than 32", "groups nested deeper than 32", tooLarge, tooLarge])
    }

    @Test func patternAutomaton_agreesWithSwiftRegexOnRandomStrings() throws {
        var rng = SeededGenerator(seed: 7)
        // Characters the wildcards may produce (ASCII and standalone ones: where the automaton and
        // `Regex` must agree), then ones they never produce (where the automaton may only refuse).
        let alphabet = Array("ab09AZ-. x#fé\"\\\t\nàÿĀ€😀🙏→")
        let others = Array("\u{7F}\u{80}\u{FFFF}\u{10000}\u{10FFFF}\u{301}\u{2028}\u{A0}一²")
        for pattern in RandomSchema.patterns + ["a|b+|(ab)*", "[^a-z]{2,}", "\\w+\\s\\d?", "(?:ab|a)(c|)", "[-.a]+", "é+", ".é.", "\\D\\S",
                                                ".+", "\\s+", "[\"\\\\]+a", "a\\tb|\\n",
                                                "[à-ÿ]+", "[^é]{2}", "[^à-ÿa]+", "[a-é]+", "[é\\d]+", "[\u{80}-\u{FFFF}]+", "[^\u{80}-\u{10FFFF}]*",
                                                "[😀-\u{10FFFF}]", "[€-😀]{1,3}", "[\\-é]+"] {
            let automaton = try PatternAutomaton(pattern)
            let regex = try Regex(pattern).matchingSemantics(.unicodeScalar)
            // `\w` is ASCII here (documented); Swift's takes `é` too.
            let letters = pattern.contains("\\w") ? alphabet.filter(\.isASCII) : alphabet
            for _ in 0 ..< 400 {
                let s = String((0 ..< Int.random(in: 0 ... 8, using: &rng)).map { _ in letters.randomElement(using: &rng)! })
                let expected = (try? regex.wholeMatch(in: s)) != nil
                #expect(automaton.matches(s) == expected, "/\(pattern)/ on \"\(s)\"")
            }
            for _ in 0 ..< 200 {
                let s = String((0 ..< Int.random(in: 1 ... 6, using: &rng)).map { _ in (Bool.random(using: &rng) ? others : alphabet).randomElement(using: &rng)! })
                if automaton.matches(s) { #expect((try? regex.wholeMatch(in: s)) != nil, "/\(pattern)/ on \"\(s)\"") }
            }
        }
    }

    /// Random patterns of every construct the automaton reads, over random strings that mix what
    /// the wildcards produce with what they must not (combining marks, joiners, regional
    /// indicators, separators, Unicode spaces and digits, `\r`): every string the automaton takes,
    /// `Regex` takes too, by characters (its default). Scalar by scalar is the same thing for these
    /// strings, but Swift's `Regex` has a quirk there: with `.unicodeScalar` semantics `\w` that
    /// takes a digit or `_` refuses to go on to a non-ASCII scalar (`/\w€/` refuses `"9€"`, takes
    /// `"a€"`), so this checks characters only.
    @Test func patternAutomaton_randomPatterns_takeNothingRegexRefuses() throws {
        var rng = SeededGenerator(seed: 99)
        let atoms = ["a", "b", "é", "😀", ".", "[a-c]", "[^a]", "[^é\\d]", "\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "[\\s\\d]", "[^\\s]",
                     "[^\\W]", "x", "\\n", "\\t", "-", "[à-ÿ]", "[^😀]", "1", " "]
        let quantifiers = ["", "", "", "*", "+", "?", "{0,3}", "{2}", "{1,2}"]
        func pattern(_ depth: Int) -> String {
            (0 ..< Int.random(in: 1 ... 3, using: &rng)).map { _ in
                let atom = depth < 2 && Int.random(in: 0 ..< 5, using: &rng) == 0 ? "(" + pattern(depth + 1) + "|" + pattern(depth + 1) + ")"
                                                                                   : atoms.randomElement(using: &rng)!
                return atom + quantifiers.randomElement(using: &rng)!
            }.joined()
        }
        let alphabet = Array("abxé😀1 -\t\nàÿ\u{301}\u{2028}\u{A0}一²\r\u{85}ĀЖ€→\u{1F1E6}\u{200D}_Z9")
        var taken = 0
        for _ in 0 ..< 150 {
            let p = pattern(0), regex = try Regex(p)
            guard let automaton = try? PatternAutomaton(p) else { continue }   // too large: a typed error, tested elsewhere
            for _ in 0 ..< 300 {
                let s = String((0 ..< Int.random(in: 0 ... 6, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
                guard automaton.matches(s) else { continue }
                taken += 1
                #expect((try? regex.wholeMatch(in: s)) != nil, "/\(p)/ takes \(s.unicodeScalars.map { String($0.value, radix: 16) })")
            }
        }
        #expect(taken > 1_000)
    }

    /// The UTF-8 forms of non-ASCII scalar ranges: byte-range sequences whose strings are the
    /// encodings of exactly the ranges' scalars, none ill-formed (no surrogate, nothing past
    /// U+10FFFF); for all of them, the well-formed table's eight rows. Checked by counting every
    /// string the sequences take against the scalars, and by every scalar in windows around the
    /// boundaries where encodings change length.
    @Test func scalarRanges_utf8Sequences_encodeExactlyTheScalarsOfTheRanges() {
        var rng = SeededGenerator(seed: 31)
        let boundaries: [UInt32] = [0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0x10FFFF]
        var sets: [[ClosedRange<UInt32>]] = [[0x80 ... 0x10FFFF], [0xE9 ... 0xE9], [0xE0 ... 0xFF, 0x20AC ... 0x20AC], [0x1F600 ... 0x1F64F],
                                            [0x0 ... 0x7F], [0x7F ... 0x800], [0xD000 ... 0xE100], [0x10000 ... 0x10FFFF], [0x50 ... 0x11_0000]]
        for _ in 0 ..< 40 {
            sets.append((0 ..< Int.random(in: 1 ... 4, using: &rng)).map { _ in
                let a = boundaries.randomElement(using: &rng)! &+ UInt32.random(in: 0 ... 300, using: &rng) &- 150
                let b = Bool.random(using: &rng) ? a &+ UInt32.random(in: 0 ... 5000, using: &rng) : UInt32.random(in: 0x80 ... 0x10FFFF, using: &rng)
                return min(a, b) ... max(a, b)
            })
        }
        func isScalar(_ v: UInt32) -> Bool { v >= 0x80 && v <= 0x10FFFF && !(0xD800 ... 0xDFFF).contains(v) }
        for ranges in sets {
            let sequences = ScalarRanges.utf8Sequences(ranges)
            let taken = sequences.reduce(0) { $0 + $1.reduce(1) { $0 * $1.count } }
            func overlap(_ a: ClosedRange<UInt32>, _ b: ClosedRange<UInt32>) -> Int {
                a.overlaps(b) ? a.clamped(to: b).count : 0
            }
            let scalars = ScalarRanges.normalized(ranges).reduce(0) { total, r in
                total + r.count - [0x0 ... 0x7F, 0xD800 ... 0xDFFF, 0x11_0000 ... UInt32.max].reduce(0) { $0 + overlap(r, $1) }
            }
            #expect(taken == scalars, "\(ranges)")
            let window = boundaries.flatMap { b in (b &- 40 ... b &+ 40) } + ranges.flatMap { [$0.lowerBound &- 1, $0.lowerBound, $0.upperBound, $0.upperBound &+ 1] }
            for v in window where isScalar(v) {
                let bytes = Array(UTF8.encode(Unicode.Scalar(v)!)!)
                let found = sequences.contains { $0.count == bytes.count && zip($0, bytes).allSatisfy { $0.contains($1) } }
                #expect(found == ranges.contains { $0.contains(v) }, "U+\(String(v, radix: 16)) in \(ranges)")
            }
        }
        let all = ScalarRanges.utf8Sequences([ScalarRanges.nonASCII])
        #expect(all.map { [$0[0], $0[1]] } == WellFormedUTF8.sequences.map { [$0.lead, $0.second] })
        #expect(all.map(\.count) == WellFormedUTF8.sequences.map(\.length))
        #expect(ScalarRanges.complement([0xE9 ... 0xE9, 0x50 ... 0x90]) == [0x91 ... 0xE8, 0xEA ... 0x10FFFF])
        #expect(ScalarRanges.complement([ScalarRanges.nonASCII]).isEmpty)
    }

    /// A negated class with a non-ASCII member takes the UTF-8 forms of every other standalone
    /// scalar (``ScalarRanges/standalone``), so it still builds at the largest counted repetition,
    /// and refuses the member, and whatever is not standalone, wherever it stands.
    @Test func patternAutomaton_negatedNonASCIIClass_buildsAtTheLargestRepetition() throws {
        let automaton = try PatternAutomaton("[^é]{\(PatternAutomaton.maximumRepetition)}")
        let pieces = ["a", "è", "ê", "¡", "\u{2FF}", "\u{400}", "\u{57F}", "ễ", "—", "€", "→", "中", "가", "😀", "\u{1F9FF}", "\""]
        var rng = SeededGenerator(seed: 5)
        for refused in ["é", "\u{80}", "\u{301}", "\u{2028}", "\u{1F3FB}", "\u{10FFFF}"] {
            var text = (0 ..< PatternAutomaton.maximumRepetition).map { _ in pieces.randomElement(using: &rng)! }
            #expect(automaton.matches(text.joined()), "\(text)")
            text[Int.random(in: 0 ..< text.count, using: &rng)] = refused
            #expect(!automaton.matches(text.joined()), "\(text)")
        }
    }

    /// What the wildcards produce beyond ASCII (``ScalarRanges/standalone`` and its subsets), scalar
    /// by scalar, every one of them: a character of its own whatever stands before or after it (so
    /// a match means the same under `Regex`'s grapheme-cluster semantics as under its scalar ones),
    /// and one that `Regex` takes, under both, for `.` and `\S`, for `\D` (``ScalarRanges/standaloneNonDigits``)
    /// and for `\W` (``ScalarRanges/standaloneNonWord``, inside ``ScalarRanges/standalone``).
    @Test func scalarRanges_standalone_isCharactersOfTheirOwnThatRegexWildcardsTake() throws {
        func both(_ pattern: String) throws -> (String) -> Bool {
            let grapheme = try Regex(pattern), scalar = grapheme.matchingSemantics(.unicodeScalar)
            return { s in (try? grapheme.wholeMatch(in: s)) != nil && (try? scalar.wholeMatch(in: s)) != nil }
        }
        let dot = try both("."), notSpace = try both("\\S"), notDigit = try both("\\D"), notWord = try both("\\W")
        func scalars(_ ranges: [ClosedRange<UInt32>]) -> [String] {
            ranges.flatMap { $0.compactMap { Unicode.Scalar($0).map { String(Character($0)) } } }
        }
        var checked = 0
        for c in scalars(ScalarRanges.standalone) {
            checked += 1
            #expect(("a" + c + "a").count == 3 && (c + c).count == 2 && (c + "\n").count == 2, "U+\(String(c.unicodeScalars.first!.value, radix: 16)) joins")
            #expect(dot(c) && notSpace(c), "U+\(String(c.unicodeScalars.first!.value, radix: 16))")
        }
        #expect(checked > 30_000)
        let standalone = Set(scalars(ScalarRanges.standalone))
        for c in scalars(ScalarRanges.standaloneNonDigits) { #expect(notDigit(c) && standalone.contains(c), "U+\(String(c.unicodeScalars.first!.value, radix: 16))") }
        for c in scalars(ScalarRanges.standaloneNonWord) { #expect(notWord(c) && standalone.contains(c), "U+\(String(c.unicodeScalars.first!.value, radix: 16))") }
    }

    /// The wildcards never produce a scalar that joins its neighbour or that `Regex` refuses there:
    /// combining marks, joiners, regional indicators, emoji modifiers, line and paragraph
    /// separators, whitespace, Unicode digits under `\D` (and in `[^\d]`), letters under `\W`;
    /// and a negated class with `\D`, `\W` or `\S` among its members produces nothing beyond ASCII.
    @Test func patternAutomaton_wildcards_produceNothingRegexRefusesUnderEitherSemantics() throws {
        let tricky = ["\u{301}", "\u{200D}", "\u{200C}", "\u{1F1E6}", "\u{1F3FB}", "\u{2028}", "\u{2029}", "\u{85}", "\u{A0}", "\u{3000}",
                      "\u{2009}", "一", "²", "½", "①", "\u{661}", "\u{966}", "é", "Ж", "ß", "\u{93F}", "\u{E33}", "\u{1100}", "\u{AC00}\u{11A8}",
                      "\r\n", "€", "→", "😀"]
        for pattern in [".", "\\D", "\\W", "\\S", "[^a]", "[^\\d]", "[^\\w]", "[^\\D]", "[^\\W]", "[^\\S]", "[^é\\d]", ".{2}", "[^x]{2}"] {
            let automaton = try PatternAutomaton(pattern)
            let grapheme = try Regex(pattern), scalar = grapheme.matchingSemantics(.unicodeScalar)
            for c in tricky + tricky.flatMap({ a in ["a", "é", "\u{1F1E8}"].map { a + $0 } }) where automaton.matches(c) {
                #expect((try? grapheme.wholeMatch(in: c)) != nil && (try? scalar.wholeMatch(in: c)) != nil,
                        "/\(pattern)/ takes \(c.unicodeScalars.map { String($0.value, radix: 16) }), which Regex refuses")
            }
        }
        // What each still takes beyond ASCII.
        #expect(try PatternAutomaton(".").matches("é") && PatternAutomaton("\\D").matches("é") && PatternAutomaton("\\W").matches("€"))
        #expect(try !PatternAutomaton("\\W").matches("é") && !PatternAutomaton("[^\\D]").matches("é") && PatternAutomaton("[^\\D]").matches("7"))
    }

    /// A class of thousands of separate non-ASCII members (every other scalar from U+0100): alone it
    /// takes exactly its members; repeated 64 times it is refused with a typed error as too large
    /// (its states, or the construction's work, which counts every edge it visits), not built.
    @Test func patternAutomaton_classOfThousandsOfMembers_isExactOrRefusedAsTooLarge() throws {
        let members = stride(from: UInt32(0x100), to: 0x100 + 2 * 6_000, by: 2).map { String(Character(Unicode.Scalar($0)!)) }.joined()
        do {
            _ = try PatternAutomaton("[\(members)]{64}")
            Issue.record("a class of 6,000 members repeated 64 times was built")
        } catch let GenerationSchema.SchemaError.unsupportedPattern(_, reason) {
            #expect(reason.contains("too large") || reason.contains("more than"), "\(reason)")
        }
        let one = try PatternAutomaton("[\(members)]")
        let probes: [UInt32] = [0xFF, 0x100, 0x101, 0x7FE, 0x7FF, 0x800, 0x801, 0x100 + 2 * 5_999, 0x100 + 2 * 6_000]
        for v in probes {
            let taken = v >= 0x100 && v < 0x100 + 2 * 6_000 && v % 2 == 0
            #expect(one.matches(String(Character(Unicode.Scalar(v)!))) == taken, "U+\(String(v, radix: 16))")
        }
    }

    /// Braces as Swift's `Regex` reads them: `{,m}` is up to m, spaces may stand inside a
    /// quantifier, and a brace that opens no quantifier (`{}`, `{,}`, unclosed) is a literal.
    @Test func patternAutomaton_braces_areReadAsSwiftRegexReadsThem() throws {
        var rng = SeededGenerator(seed: 12)
        let alphabet = Array("x{},23 ")
        var compared = 0
        for pattern in ["x{,3}", "x{,3}?", "x{ ,2}", "x{,}", "x{}", "x{ }", "x{ 2 }", "x{ 2 , 3 }", "x{2, }", "x{2,3}", "x{", "x{2", "x{2,",
                        "(x|2){,2}3", "x{,0}"] {
            let automaton = try PatternAutomaton(pattern)
            guard let regex = try? Regex(pattern).matchingSemantics(.unicodeScalar) else { continue }
            compared += 1
            for _ in 0 ..< 300 {
                let s = String((0 ..< Int.random(in: 0 ... 7, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
                #expect(automaton.matches(s) == ((try? regex.wholeMatch(in: s)) != nil), "/\(pattern)/ on \"\(s)\"")
            }
            for s in [String(pattern.dropLast(pattern.hasSuffix("?") ? 1 : 0)), "x", "xx", "xxx", ""] {
                #expect(automaton.matches(s) == ((try? regex.wholeMatch(in: s)) != nil), "/\(pattern)/ on \"\(s)\"")
            }
        }
        #expect(compared >= 12)
    }

    @Test func grammarState_freeString_takesJSONEscapesButNoSurrogateHalves() throws {
        let grammar = try SchemaGrammar(GenerationSchema(root: .string(choices: nil, pattern: nil)),
                                        vocabulary: ConstrainedDecodingPropertyTests.vocabulary)
        func state(_ text: String) -> GrammarState? {
            var s = GrammarState(grammar)
            return s.feed(Array(text.utf8)) ? s : nil
        }
        for text in [#""a\"b\\c\/\b\f\n\r\t""#, #""\u00e9\uD7FF\ue000\uFFFF\u0000""#, #""é😀""#] {
            let s = try #require(state(text), "\(text)")
            #expect(s.isFinished, "\(text)")
            #expect(try String(GeneratedContent(json: text)).isEmpty == false)
        }
        for text in [#""\x"#, #""\u12g"#, #""\ud8"#, #""\uDFFF"#, #""\U0041"#, "\"a\n"] {
            #expect(state(text) == nil, "\(text)")
        }
        #expect(state("\"\u{7F}") != nil)   // DEL is not a control character in JSON
        // The fewest bytes to finish: the rest of an escape, then the closing quote.
        for (text, remaining) in [(#""ab"#, 1), (#""ab\"#, 2), (#""\u"#, 5), (#""\u00"#, 3), (#""\u00e"#, 2), (#""\u00e9"#, 1)] {
            #expect(state(text)?.remaining == remaining, "\(text)")
        }
    }

    @Test func grammarState_patternString_takesTheEscapesOfWhatItMatches() throws {
        let grammar = try SchemaGrammar(GenerationSchema(root: .string(choices: nil, pattern: #"say "[a-z]+"\\?"#)),
                                        vocabulary: ConstrainedDecodingPropertyTests.vocabulary)
        func state(_ text: String) -> GrammarState? {
            var s = GrammarState(grammar)
            return s.feed(Array(text.utf8)) ? s : nil
        }
        for (text, value) in [(#""say \"hi\"""#, #"say "hi""#), (#""say \"hi\"\\""#, #"say "hi"\"#)] {
            #expect(state(text)?.isFinished == true, "\(text)")
            #expect(try String(GeneratedContent(json: text)) == value)
        }
        // A raw quote closes the string; only the two-byte escapes are taken; no escape the pattern does not match.
        for text in [#""say "hi""#, #""say \u0022"#, #""say \"hi\"\""#, #""say \n"#, #""say \"h\t"#] {
            #expect(state(text) == nil, "\(text)")
        }
        // The fewest bytes to finish count each escape's two bytes.
        for (text, remaining) in [("", 11), (#""say "#, 6), (#""say \"#, 5), (#""say \"a"#, 3), (#""say \"a\""#, 1)] {
            #expect((text.isEmpty ? GrammarState(grammar) : state(text))?.remaining == remaining, "\(text)")
        }
    }

    @Test func numberRule_completesWithinBoundsOnly() throws {
        let rule = try NumberRule(minimum: 12, maximum: 340, integral: true)
        func feed(_ text: String) -> NumberRule.State? {
            var s = NumberRule.State()
            for b in text.utf8 { guard let n = rule.step(s, b) else { return nil }; s = n }
            return s
        }
        #expect(feed("5") != nil)      // 50...59 remain
        #expect(feed("4") != nil)      // 40...49
        #expect(feed("9") != nil)      // 90...99
        #expect(feed("-") == nil)
        #expect(feed("0") == nil)
        #expect(rule.isComplete(feed("35")!))
        #expect(feed("350") == nil)
        #expect(feed("341") == nil)
        #expect(rule.isComplete(feed("340")!))
        #expect(!rule.isComplete(feed("3")!))
        #expect(rule.remaining(feed("3")!) == 1)   // 30...39
        let fraction = try NumberRule(minimum: 0.5, maximum: 0.75, integral: false)
        #expect(fraction.remaining(NumberRule.State()) == 3)   // "0.5"
    }

    @Test func patternParser_randomPatterns_neverCrashAndAgreeWithRegexWhenAccepted() throws {
        var rng = SeededGenerator(seed: 99)
        let pieces = Array(#"ab.[]^-$()|?*+{},\d\w19é"#).map(String.init) + ["{2}", "{1,3}", "[a-c]", "(?:", "\\", "{,}", "[^x]"]
        var accepted = 0
        for _ in 0 ..< 4000 {
            let pattern = (0 ..< Int.random(in: 0 ... 10, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            guard let automaton = try? PatternAutomaton(pattern) else { continue }
            accepted += 1
            // Where Swift's Regex reads the pattern the same way, whole matches agree on ASCII samples.
            guard let regex = try? Regex(pattern).matchingSemantics(.unicodeScalar), !pattern.contains("w"), !pattern.contains("é") else { continue }
            for sample in ["", "a", "ab", "b1", "9", "aaa", "-", "x", "ab9"] {
                #expect(automaton.matches(sample) == ((try? regex.wholeMatch(in: sample)) != nil), "/\(pattern)/ on \"\(sample)\"")
            }
        }
        #expect(accepted > 500)
    }
}
