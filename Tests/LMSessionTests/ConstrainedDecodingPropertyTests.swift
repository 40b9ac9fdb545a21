import Foundation
import LMRuntime
@testable import LMSession
import LMTestSupport
import Synchronization
import Testing

/// Random schemas, random budgets, random token choices: every output must be a complete
/// value that decodes into its schema and satisfies every guide, within its budget.
///
/// The checks here are independent of the decoder: JSON is read by `GeneratedContent(json:)`,
/// patterns by Swift's own `Regex`, ranges and counts by plain comparisons.
@Suite struct ConstrainedDecodingPropertyTests {
    /// The bundled vocabulary's first 700 pieces (every byte and the commonest merges) plus pieces
    /// that straddle JSON structure or hold string escapes, so boundary-spanning tokens are
    /// exercised in every case.
    static let vocabulary: TokenVocabulary = {
        let t = Fixtures.bundledTokenizer
        var pieces = Array(t.pieces.prefix(700)), scores = Array(t.scores.prefix(700))
        for extra in ["\",", "\"}", "\":", "{\"", "],", "\":\"", "1,", "true}", "null,", "\"]", "[\"", "},{\"", "0.", "-1", "\"code\":\"", "AB", #"\""#, #"\n"#, #"\u00"#, #"\ud"#, #""\"#] {
            pieces.append(Array(extra.utf8))
            scores.append(-1000)
        }
        return TokenVocabulary(Tokenizer(pieces: pieces, scores: scores))
    }()

    static var caseCount: Int { ProcessInfo.processInfo.environment["KVSESSION_LONG_PROPERTY_TESTS"] == nil ? 1000 : 20000 }

    @Test func decode_randomSchemasAndBudgets_alwaysGiveValidCompleteValues() throws {
        var rng = SeededGenerator(seed: 0x5eed)
        var checked = 0, refusedByOther = 0, atMinimumBudget = 0, escaped = 0, readTogether = 0, numbersTogether = 0, arraysTogether = 0, countsTogether = 0
        for index in 0 ..< Self.caseCount {
            // Mostly structures; a quarter of the roots a choice between structures (whose shared
            // parts nothing encloses), some any value at all.
            let node = switch index % 8 {
            case 1, 5: RandomSchema.structures(depth: 0, &rng)
            case 3: RandomSchema.value(depth: 0, &rng)
            default: RandomSchema.object(depth: 0, &rng)
            }
            let grammar = try SchemaGrammar(GenerationSchema(root: node), vocabulary: Self.vocabulary)
            if grammar.nodes.contains(where: { if case .text = $0 { true } else { false } }) { readTogether += 1 }
            if grammar.nodes.contains(where: { if case .numbers = $0 { true } else { false } }) { numbersTogether += 1 }
            if grammar.nodes.contains(where: { if case .counted = $0 { true } else { false } }) { arraysTogether += 1 }
            if grammar.nodes.contains(where: { if case let .counted(_, _, counts, _, _) = $0 { counts.count > 1 } else { false } }) { countsTogether += 1 }
            let minimum = grammar.minimumLength[grammar.root]
            let budget = index % 5 == 0 ? minimum : minimum + Int.random(in: 0 ... 60, using: &rng)
            if budget == minimum { atMinimumBudget += 1 }
            let (bytes, used) = try Self.decode(grammar, budget: budget, rng: &rng)
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(used <= budget, "case \(index): \(used) tokens for a budget of \(budget)")
            let content = try GeneratedContent(json: text)
            // Fixed names and choices only ever escape quotes: any other escape was generated.
            if zip(bytes, bytes.dropFirst()).contains(where: { $0 == UInt8(ascii: "\\") && $1 != UInt8(ascii: "\"") }) { escaped += 1 }
            if let problem = SchemaCheck.problem(content, node) {
                Issue.record("case \(index): \(problem)\nschema: \(SchemaText.render(node))\noutput: \(text)")
                return
            }
            // The JSON Schema form the package writes says the same, as read by an independent checker;
            // and for another random schema both checkers agree whether the value conforms.
            #expect(try SchemaConformance.problem(content, schema: Self.jsonSchema(node)) == nil, "case \(index): \(text)")
            let other = RandomSchema.object(depth: 0, &rng)
            let verdicts = (SchemaCheck.problem(content, other), try SchemaConformance.problem(content, schema: Self.jsonSchema(other)))
            #expect((verdicts.0 == nil) == (verdicts.1 == nil), "case \(index): \(text) against \(SchemaText.render(other)): \(verdicts)")
            if verdicts.1 != nil { refusedByOther += 1 }
            checked += 1
        }
        #expect(checked == Self.caseCount)
        #expect(refusedByOther >= Self.caseCount / 2, "another schema refused the value in only \(refusedByOther) cases")
        #expect(atMinimumBudget >= Self.caseCount / 5)
        #expect(escaped >= Self.caseCount / 50, "string escapes were decoded in only \(escaped) cases")
        #expect(readTogether >= Self.caseCount / 50, "strings of several shapes were read together in only \(readTogether) cases")
        #expect(numbersTogether >= Self.caseCount / 50, "numbers under several rules were read together in only \(numbersTogether) cases")
        #expect(arraysTogether >= Self.caseCount / 50, "arrays were read together in only \(arraysTogether) cases")
        #expect(countsTogether >= Self.caseCount / 50, "arrays of several counts were read as one in only \(countsTogether) cases")
    }

    /// `node`'s JSON Schema form, as the package encodes it, read back as plain content.
    static func jsonSchema(_ node: SchemaNode) throws -> GeneratedContent {
        try GeneratedContent(json: String(decoding: JSONEncoder().encode(GenerationSchema(root: node)), as: UTF8.self))
    }

    /// Whether the grammar of `node` takes each of `texts` whole (finished, or a whole number at the top).
    static func accepts(_ node: SchemaNode, _ texts: String...) throws -> [Bool] {
        let grammar = try SchemaGrammar(GenerationSchema(root: node), vocabulary: vocabulary)
        return texts.map { text in
            var state = GrammarState(grammar)
            return state.feed(Array(text.utf8)) && state.canStop
        }
    }

    /// Every automaton that reads any non-ASCII text (free strings, strings of several shapes read
    /// together) takes exactly the well-formed UTF-8 sequences: no overlong form, no surrogate
    /// half, nothing past U+10FFFF (found by the `generation-schema` fuzz target: `.` took
    /// `ED A0 80`, which decodes as three U+FFFD; a pattern's wildcards now take a well-formed subset,
    /// ``ScalarRanges/standalone``, tested with the patterns).
    @Test func schemaGrammar_nonASCIIText_takesExactlyWellFormedUTF8() throws {
        let shapes: [SchemaNode] = [
            .string(choices: nil, pattern: nil),
            .anyOf(name: "Text", description: nil, choices: [.string(choices: nil, pattern: nil), .string(choices: nil, pattern: "(yes|no)")]),
        ]
        for node in shapes {
            let grammar = try SchemaGrammar(GenerationSchema(root: node), vocabulary: Self.vocabulary)
            var wellFormed = 0
            for lead in UInt8(0x80) ... 0xFF {
                for second in [UInt8(0x41)] + Array(UInt8(0x80) ... 0xFF) {
                    for extra in 0 ... 2 {
                        let text = [lead, second] + Array(repeating: UInt8(0x80), count: extra)
                        var state = GrammarState(grammar)
                        let taken = state.feed([UInt8(ascii: "\"")] + text + [UInt8(ascii: "\"")]) && state.isFinished
                        let valid = String(validating: text, as: UTF8.self) != nil
                        if valid { wellFormed += 1 }
                        #expect(taken == valid, "\(SchemaText.render(node)) on \(text.map { String($0, radix: 16) })")
                    }
                }
            }
            // C2-DF with 80-BF; E0, E1-EC, ED, EE-EF; F0, F1-F3, F4 (each lead with its seconds).
            #expect(wellFormed == 30 * 64 + (64 - 32) + 12 * 64 + (64 - 32) + 2 * 64 + (64 - 16) + 3 * 64 + 16)
        }
    }

    /// A choice between structures at the top, whose branches read an array of numbers together:
    /// nothing encloses the number, yet the value is whole only after what follows it (found by
    /// the `generation-schema` fuzz target: the decoder stopped after `{"d":[3`).
    @Test func schemaGrammar_aChoiceOfStructuresAtTheTop_stopsOnlyWhereTheValueIsWhole() throws {
        let digits = { (lo: Double) in SchemaNode.number(minimum: lo, maximum: 9, integral: true) }
        let choice = SchemaNode.anyOf(name: "Top", description: nil, choices: [
            object(property("d", .array(element: digits(3), minimumCount: nil, maximumCount: 1)), property("u", .string(choices: ["km"], pattern: nil))),
            object(property("d", .array(element: digits(0), minimumCount: 2, maximumCount: nil))),
        ])
        #expect(try Self.accepts(choice, #"{"d":[3"#, #"{"d":[3]"#, #"{"d":[3,4"#, #"{"d":[3],"u":"km"}"#, #"{"d":[1,4]}"#, "5")
            == [false, false, false, true, true, false])
    }

    /// Choices between structures that start alike: the grammar takes every branch's JSON
    /// whole and nothing that mixes two branches or ends one early.
    @Test func schemaGrammar_structuresThatStartAlike_acceptEachBranchAndNothingElse() throws {
        let number = SchemaNode.number(minimum: 0, maximum: 99, integral: true)
        let tag = { (t: String) in SchemaNode.string(choices: [t], pattern: nil) }
        // A shared property, then a tag (one tag in two branches), then each branch's own part.
        let tagged = SchemaNode.anyOf(name: "Shape", description: nil, choices: [
            object(property("id", number), property("type", tag("circle")), property("radius", number)),
            object(property("id", number), property("type", tag("square")), property("side", number)),
            object(property("id", number), property("type", tag("square")), property("side", number), property("filled", .boolean)),
            object(property("id", number), property("type", .boolean, optional: true)),
        ])
        for text in [#"{"id":1,"type":"circle","radius":2}"#, #"{"id":1,"type":"square","side":3}"#,
                     #"{"id":1,"type":"square","side":3,"filled":false}"#, #"{"id":7,"type":null}"#, #"{"id":7,"type":true}"#] {
            #expect(try Self.accepts(tagged, text) == [true], "\(text)")
        }
        for text in [#"{"id":1,"type":"circle","side":2}"#, #"{"id":1,"type":"square","radius":3}"#,
                     #"{"id":1,"type":"circle","radius":2,"filled":true}"#, #"{"id":1,"type":"square"}"#,
                     #"{"id":1,"type":"triangle","side":3}"#, #"{"id":1}"#, #"{"id":1,"type":null,"side":3}"#] {
            #expect(try Self.accepts(tagged, text) == [false], "\(text)")
        }
        // Told apart only where one ends and the other goes on; and the same structure twice.
        let walk = object(property("distance", number))
        let ending = SchemaNode.anyOf(name: "Step", description: nil, choices: [walk, object(property("distance", number), property("pace", number)), walk, object()])
        for text in [#"{"distance":4}"#, #"{"distance":4,"pace":5}"#, "{}"] { #expect(try Self.accepts(ending, text) == [true], "\(text)") }
        for text in [#"{"distance":4,"pace":5,"distance":4}"#, #"{"pace":5}"#, #"{"distance":4,"#] { #expect(try Self.accepts(ending, text) == [false], "\(text)") }
        // Tags with thousands of values: told apart up to the limit, refused beyond it.
        func tags(_ count: Int, _ prefix: String) -> SchemaNode {
            object(property("type", .string(choices: (0 ..< count).map { "\(prefix)\($0)" }, pattern: nil)), property(prefix, number))
        }
        let many = SchemaNode.anyOf(name: "Many", description: nil, choices: [tags(1_000, "a"), tags(1_000, "b")])
        #expect(try Self.accepts(many, #"{"type":"b999","b":3}"#, #"{"type":"b999","a":3}"#, #"{"type":"a0","a":3}"#) == [true, false, true])
        let tooMany = SchemaNode.anyOf(name: "TooMany", description: nil, choices: [tags(2_100, "a"), tags(2_100, "b")])
        #expect { try SchemaGrammar(GenerationSchema(root: tooMany), vocabulary: Self.vocabulary) } throws: { "\($0)".contains("4096") }
        // Parting on a value of another shape: told apart by its first byte, a structure
        // property by property, an optional one by `null`.
        let free = SchemaNode.string(choices: nil, pattern: nil)
        let shapes = SchemaNode.anyOf(name: "Either", description: nil, choices: [
            walk, object(property("distance", free)), object(property("distance", .array(element: number, minimumCount: nil, maximumCount: 2))),
            object(property("distance", object(property("km", number)), optional: true), property("unit", tag("km"))),
            object(property("distance", object(property("mi", number))), property("note", free)),
        ])
        #expect(try Self.accepts(shapes, #"{"distance":4}"#, #"{"distance":"far"}"#, #"{"distance":[1,2]}"#, #"{"distance":{"km":3},"unit":"km"}"#,
                            #"{"distance":null,"unit":"km"}"#, #"{"distance":{"mi":3},"note":"x"}"#)
            == [true, true, true, true, true, true])
        #expect(try Self.accepts(shapes, #"{"distance":{"km":3},"note":"x"}"#, #"{"distance":{"mi":3},"unit":"km"}"#, #"{"distance":null}"#,
                            #"{"distance":true}"#, #"{"distance":[1,2,3]}"#, #"{"distance":"far","unit":"km"}"#)
            == [false, false, false, false, false, false])
        // The same at the top: a number, text, a boolean, a structure or an array.
        let anyNumber = SchemaNode.number(minimum: nil, maximum: nil, integral: false)
        let any = SchemaNode.anyOf(name: "Any", description: nil, choices: [anyNumber, free, .boolean, walk, .array(element: free, minimumCount: 1, maximumCount: nil)])
        #expect(try Self.accepts(any, "42", "-0.5", #""42""#, "false", #"{"distance":4}"#, #"["a","b"]"#) == [true, true, true, true, true, true])
        // Its shortest value is the shortest of any choice: one digit, one token.
        let grammar = try SchemaGrammar(GenerationSchema(root: any), vocabulary: Self.vocabulary)
        #expect(grammar.minimumLength[grammar.root] == 1)
        #expect(try Self.accepts(any, "null", "[]", "{}", "-", #""a"x"#) == [false, false, false, false, false])
    }

    /// Choices between arrays at one place: their brackets and commas are read together, and the
    /// elements (what they are, how many) tell the arrays apart, as structures are told apart.
    @Test func schemaGrammar_arraysAtOnePlace_areToldApartByTheirElements() throws {
        let number = SchemaNode.number(minimum: 0, maximum: 99, integral: true), free = SchemaNode.string(choices: nil, pattern: nil)
        let list = { (element: SchemaNode, lo: Int?, hi: Int?) in SchemaNode.array(element: element, minimumCount: lo, maximumCount: hi) }
        let km = SchemaNode.string(choices: ["km"], pattern: nil)
        // Different elements: the first element decides, and the rest of its array holds to it.
        let mixed = SchemaNode.anyOf(name: "Mixed", description: nil, choices: [list(.boolean, nil, nil), list(free, nil, nil)])
        #expect(try Self.accepts(mixed, "[true,false]", #"["a","b"]"#, "[]", #"[true,"a"]"#, #"["a",false]"#, "[true,]", "[")
            == [true, true, true, false, false, false, false])
        // The same elements, counts up to 2 or 3, each followed by its own property.
        let counted = SchemaNode.anyOf(name: "Either", description: nil, choices: [
            object(property("distance", list(number, nil, 2)), property("unit", km)),
            object(property("distance", list(number, nil, 3)), property("note", free)),
        ])
        #expect(try Self.accepts(counted, #"{"distance":[1,2],"unit":"km"}"#, #"{"distance":[1,2,3],"note":"x"}"#,
                                 #"{"distance":[],"unit":"km"}"#, #"{"distance":[1],"note":"x"}"#) == [true, true, true, true])
        #expect(try Self.accepts(counted, #"{"distance":[1,2,3],"unit":"km"}"#, #"{"distance":[1,2,3,4],"note":"x"}"#,
                                 #"{"distance":[1,2],"unit":"mi"}"#, #"{"distance":[1,2]}"#) == [false, false, false, false])
        // Different elements inside structures, then different properties.
        let elements = SchemaNode.anyOf(name: "Either", description: nil, choices: [
            object(property("distance", list(number, 1, nil)), property("unit", km)),
            object(property("distance", list(free, nil, nil)), property("note", .boolean)),
        ])
        #expect(try Self.accepts(elements, #"{"distance":[4,5],"unit":"km"}"#, #"{"distance":["a"],"note":true}"#,
                                 #"{"distance":[],"note":false}"#) == [true, true, true])
        #expect(try Self.accepts(elements, #"{"distance":[],"unit":"km"}"#, #"{"distance":[4],"note":true}"#,
                                 #"{"distance":["a"],"unit":"km"}"#, #"{"distance":[4,"a"],"unit":"km"}"#) == [false, false, false, false])
        // Unbounded arrays of the same elements and different least counts; arrays of arrays.
        let least = SchemaNode.anyOf(name: "Least", description: nil, choices: [
            object(property("x", list(number, 2, nil)), property("a", .boolean)), object(property("x", list(number, nil, nil)), property("b", .boolean)),
        ])
        #expect(try Self.accepts(least, #"{"x":[1,2,3],"a":true}"#, #"{"x":[1,2,3],"b":true}"#, #"{"x":[],"b":true}"#,
                                 #"{"x":[1],"a":true}"#, #"{"x":[],"a":true}"#) == [true, true, true, false, false])
        let nested = SchemaNode.anyOf(name: "Nested", description: nil, choices: [list(list(number, nil, nil), nil, nil), list(list(free, nil, nil), nil, 1)])
        #expect(try Self.accepts(nested, "[[1],[2,3]]", #"[["a","b"]]"#, "[[],[]]", "[[]]", #"[["a"],["b"]]"#, #"[[1],["a"]]"#)
            == [true, true, true, true, false, false])
        // Its shortest value is the shortest of any branch: `[]` where one may be empty.
        let grammar = try SchemaGrammar(GenerationSchema(root: mixed), vocabulary: Self.vocabulary)
        #expect(grammar.minimumLength[grammar.root] <= 2)
        // Counts far apart: one array read under both ranges, the count at `]` picking what follows.
        let far = SchemaNode.anyOf(name: "Far", description: nil, choices: [
            object(property("x", list(number, 2, 500)), property("a", .boolean)), object(property("x", list(number, 400, 1_000)), property("b", .boolean)),
        ])
        let ones = { (n: Int) in "[" + Array(repeating: "1", count: n).joined(separator: ",") + "]" }
        #expect(try Self.accepts(far, #"{"x":\#(ones(450)),"a":true}"#, #"{"x":\#(ones(450)),"b":true}"#, #"{"x":\#(ones(2)),"a":true}"#,
                                 #"{"x":\#(ones(1_000)),"b":true}"#) == [true, true, true, true])
        #expect(try Self.accepts(far, #"{"x":\#(ones(501)),"a":true}"#, #"{"x":\#(ones(399)),"b":true}"#, #"{"x":\#(ones(1)),"a":true}"#,
                                 #"{"x":\#(ones(1_001)),"b":true}"#) == [false, false, false, false])
        // Refused with a typed error: different elements that read alike for a whole element (a
        // number both ranges take).
        let reading = { (lo: Double, hi: Double) in list(object(property("km", .number(minimum: lo, maximum: hi, integral: true))), nil, nil) }
        let alike = SchemaNode.anyOf(name: "Alike", description: nil, choices: [reading(0, 10), reading(5, 100)])
        #expect { try SchemaGrammar(GenerationSchema(root: alike), vocabulary: Self.vocabulary) } throws: { "\($0)".contains("read alike") }
    }

    /// The deepest choices compile on a thread of 512 KiB, the stack of a Dispatch or Swift
    /// concurrency thread on Apple's platforms, also inside structures nested to the schema
    /// nesting limit: refused at the depth limit, never a stack overflow.
    @Test func schemaGrammar_choicesAtTheDepthLimit_compileOnASmallStack() throws {
        // Two structures of n numbers each, under ranges that overlap: after every number both
        // may go on, so the choice parts once per property.
        let choices = [31, 32, 200].map { n in   // the limit: 32 partings
            SchemaNode.anyOf(name: "Ranges", description: nil, choices: [(0.0, 10.0), (5.0, 100.0)].map { lo, hi in
                .object(name: "S", description: nil, properties: (0 ..< n).map { property("p\($0)", .number(minimum: lo, maximum: hi, integral: true)) })
            })
        }
        // The deepest choice compiled inside structures up to the nesting limit: both limits at once.
        let nested = (0 ..< GenerationSchema.nestingLimit - 3).reduce(choices[0]) { inner, _ in object(property("inner", inner)) }
        let outcomes = Mutex<[String]>([])
        onSmallStack {
            for choice in choices + [nested] {
                let compiled = (try? SchemaGrammar(GenerationSchema(root: choice), vocabulary: Self.vocabulary)) != nil
                outcomes.withLock { $0.append(compiled ? "compiled" : "refused") }
            }
        }
        #expect(outcomes.withLock { $0 } == ["compiled", "refused", "refused", "compiled"])
    }

    /// Strings of several shapes where choices part (free text, fixed choices, patterns): read
    /// together up to the closing quote, which leaves the branches whose shape took the text.
    @Test func schemaGrammar_stringsOfSeveralShapes_areReadTogetherUntilTheirClosingQuote() throws {
        let number = SchemaNode.number(minimum: 0, maximum: 99, integral: true), free = SchemaNode.string(choices: nil, pattern: nil)
        let fixed = { (choices: [String]) in SchemaNode.string(choices: choices, pattern: nil) }
        let pattern = { (p: String) in SchemaNode.string(choices: nil, pattern: p) }
        // A unit among fixed ones, or any text: "km" is both, so the next property decides.
        let unit = SchemaNode.anyOf(name: "Distance", description: nil, choices: [
            object(property("unit", fixed(["km", "mi", "say \"hi\""])), property("value", number)),
            object(property("unit", free), property("note", free)),
        ])
        #expect(try Self.accepts(unit, #"{"unit":"km","value":3}"#, #"{"unit":"km","note":"x"}"#, #"{"unit":"parsec","note":"x"}"#,
                            #"{"unit":"say \"hi\"","value":3}"#, #"{"unit":"k\u006d","note":""}"#, #"{"unit":"","note":"km"}"#)
            == [true, true, true, true, true, true])
        #expect(try Self.accepts(unit, #"{"unit":"parsec","value":3}"#, #"{"unit":"k\u006d","value":3}"#, #"{"unit":"km"}"#,
                            #"{"unit":"k","value":3}"#, #"{"unit":"say \"hi\" ","value":3}"#, #"{"unit":"mi","value":"3"}"#)
            == [false, false, false, false, false, false])
        // Patterns against each other and against fixed text: each code goes with its own kind.
        let code = SchemaNode.anyOf(name: "Code", description: nil, choices: [
            object(property("code", pattern("[A-Z]{3}")), property("kind", fixed(["airport"]))),
            object(property("code", pattern("[0-9]{4,5}")), property("kind", fixed(["zip"]))),
            object(property("code", fixed(["none", "12345"])), property("kind", fixed(["unknown"]))),
        ])
        #expect(try Self.accepts(code, #"{"code":"SFO","kind":"airport"}"#, #"{"code":"94107","kind":"zip"}"#, #"{"code":"1234","kind":"zip"}"#,
                            #"{"code":"none","kind":"unknown"}"#, #"{"code":"12345","kind":"unknown"}"#, #"{"code":"12345","kind":"zip"}"#)
            == [true, true, true, true, true, true])
        #expect(try Self.accepts(code, #"{"code":"SFO","kind":"zip"}"#, #"{"code":"123","kind":"zip"}"#, #"{"code":"1234","kind":"unknown"}"#,
                            #"{"code":"NONE","kind":"unknown"}"#, #"{"code":"SF","kind":"airport"}"#, #"{"code":"sfo","kind":"airport"}"#)
            == [false, false, false, false, false, false])
        // At the top, beside other shapes: any text, "none", or a number.
        let top = SchemaNode.anyOf(name: "Top", description: nil, choices: [free, fixed(["none"]), pattern("x+"), number])
        #expect(try Self.accepts(top, #""none""#, #""anything""#, #""xx""#, #""""#) == [true, true, true, true])
        #expect(try Self.accepts(top, #""a"b"#, "none", #""\x""#) == [false, false, false])
        // Shapes whose automata read together would take too many states (a count of the a and of
        // the b in a text, 65 × 65): refused, naming the limit.
        let counting = SchemaNode.anyOf(name: "Counting", description: nil, choices: [pattern("(b*ab*){0,64}"), pattern("(a*ba*){0,64}")])
        #expect { try SchemaGrammar(GenerationSchema(root: counting), vocabulary: Self.vocabulary) } throws: { "\($0)".contains("4096 states") }
        // The shortest value: the shortest string of any shape, then the shortest of its branch's rest.
        let grammar = try SchemaGrammar(GenerationSchema(root: unit), vocabulary: Self.vocabulary)
        let shortest = #"{"unit":"","note":""}"#
        var state = GrammarState(grammar)
        #expect(state.remaining >= grammar.minimumLength[grammar.root])
        #expect(grammar.minimumLength[grammar.root] <= shortest.utf8.count)
        for (i, byte) in shortest.utf8.enumerated() {
            let fed = state.feed(byte)
            #expect(fed)
            #expect(state.remaining <= shortest.utf8.count - i - 1, "after \(i + 1) bytes")
        }
        #expect(state.isFinished)
    }

    /// Numbers under several rules where choices part (ranges, whole or not): read together to
    /// their end, where the rules the number meets leave the branches that go on.
    @Test func schemaGrammar_numbersUnderSeveralRules_areReadTogetherUntilTheyEnd() throws {
        let whole = { (lo: Double, hi: Double) in SchemaNode.number(minimum: lo, maximum: hi, integral: true) }
        let score = SchemaNode.anyOf(name: "Score", description: nil, choices: [
            object(property("score", whole(0, 10)), property("outOf", .string(choices: ["ten"], pattern: nil))),
            object(property("score", whole(5, 100)), property("percent", .boolean)),
            object(property("score", .number(minimum: -1, maximum: 1, integral: false)), property("ratio", .boolean)),
        ])
        #expect(try Self.accepts(score, #"{"score":7,"outOf":"ten"}"#, #"{"score":7,"percent":true}"#, #"{"score":42,"percent":false}"#,
                                 #"{"score":0.5,"ratio":true}"#, #"{"score":-1,"ratio":false}"#, #"{"score":0,"outOf":"ten"}"#,
                                 #"{"score":1,"ratio":true}"#, #"{"score":1.0,"ratio":true}"#)
            == [true, true, true, true, true, true, true, true])
        #expect(try Self.accepts(score, #"{"score":42,"outOf":"ten"}"#, #"{"score":3,"percent":true}"#, #"{"score":0.5,"outOf":"ten"}"#,
                                 #"{"score":101,"percent":true}"#, #"{"score":7.5,"percent":true}"#, #"{"score":-2,"ratio":true}"#,
                                 #"{"score":1.0,"outOf":"ten"}"#, #"{"score":7}"#)
            == [false, false, false, false, false, false, false, false])
        // At the top: two ranges, a number may stop wherever one of them takes it.
        let top = SchemaNode.anyOf(name: "Top", description: nil, choices: [whole(0, 9), whole(100, 200)])
        #expect(try Self.accepts(top, "5", "150", "0") == [true, true, true])
        #expect(try Self.accepts(top, "50", "5.5", "201", "-1", "15") == [false, false, false, false, false])
        // More ranges than a choice reads together at one place: refused, naming the limit.
        let many = SchemaNode.anyOf(name: "Many", description: nil, choices: (0 ..< 7).map { whole(Double($0 * 10), Double($0 * 10 + 5)) })
        #expect { try SchemaGrammar(GenerationSchema(root: many), vocabulary: Self.vocabulary) } throws: { "\($0)".contains("more than 6 number ranges") }
    }

    /// Picks random allowed tokens (uniformly) until the value is finished.
    static func decode(_ grammar: SchemaGrammar, budget: Int, rng: inout SeededGenerator) throws -> ([UInt8], Int) {
        let masker = TokenMasker(grammar: grammar, vocabulary: vocabulary)
        var state = GrammarState(grammar)
        var mask = [UInt64](repeating: 0, count: vocabulary.wordCount)
        var out: [UInt8] = [], used = 0
        while !state.isFinished {
            masker.mask(state, budget: budget - used, into: &mask)
            var allowed: [Int] = []
            for t in 0 ..< vocabulary.count where mask[t >> 6] & (1 << UInt64(t & 63)) != 0 { allowed.append(t) }
            if state.canStop, allowed.isEmpty || Int.random(in: 0 ..< 4, using: &rng) == 0 { break }
            guard let t = allowed.randomElement(using: &rng) else {
                throw GrammarTestError.emptyMask(after: String(decoding: out, as: UTF8.self), left: budget - used, remaining: state.remaining)
            }
            guard state.feed(vocabulary.bytes[t]) else { throw GrammarTestError.refusedAllowedToken(t) }
            out += vocabulary.bytes[t]
            used += 1
        }
        return (out, used)
    }

    enum GrammarTestError: Error {
        case emptyMask(after: String, left: Int, remaining: Int)
        case refusedAllowedToken(Int)
    }
}

/// Random schema nodes with every kind of guide.
enum RandomSchema {
    static let patterns = ["[A-Z]{3}-\\d{2}", "(yes|no)", "[a-z]+( [a-z]+)?", "\\d{1,3}\\.\\d", "x*y?z+", "#[0-9a-f]{6}",
                           // Characters the JSON text escapes: a quote, a backslash, a tab, a line feed.
                           "\"[a-z]{1,5}\"", "\\\\[a-z]+", "[a-z]+\\t\\d", "[a-z]+\\n[a-z]+",
                           // Classes with members beyond ASCII, of two, three and four UTF-8 bytes.
                           "[à-ÿ]{1,4}", "[^a-zé]{2,3}", "[a-z€😀-🙏]+",
                           // Wildcards, which produce only characters of their own (no combining mark).
                           ".{1,4}", "\\W\\S\\D", "[^\\d,]{2}"]

    static func object(depth: Int, _ rng: inout SeededGenerator) -> SchemaNode {
        let count = Int.random(in: depth == 0 ? 1 ... 4 : 0 ... 3, using: &rng)
        return .object(name: "T\(depth)", description: nil, properties: (0 ..< count).map { i in
            SchemaProperty(name: ["a", "b\"q", "camelCase", "x_1", "é"][i % 5] + "\(i)", description: nil,
                           node: value(depth: depth + 1, &rng), isOptional: Int.random(in: 0 ..< 5, using: &rng) == 0)
        })
    }

    /// Two to four shapes that start with different bytes: a number, text (free, fixed choices or a
    /// pattern), a boolean, a structure, an array.
    static func distinctShapes(depth: Int, _ rng: inout SeededGenerator) -> [SchemaNode] {
        [0, 1, 2, 3, 4].shuffled(using: &rng).prefix(Int.random(in: 2 ... 4, using: &rng)).map { kind in
            switch kind {
            case 0: [SchemaNode.number(minimum: nil, maximum: nil, integral: true), .number(minimum: -5, maximum: 50, integral: false)]
                .randomElement(using: &rng)!
            case 1: [SchemaNode.string(choices: nil, pattern: nil), .string(choices: ["x", "yz"], pattern: nil),
                     .string(choices: nil, pattern: patterns[0]), .anyOf(name: "Text", description: nil, choices: textShapes(&rng))]
                .randomElement(using: &rng)!
            case 2: .boolean
            case 3: object(depth: depth + 1, &rng)
            default: .array(element: value(depth: depth + 1, &rng), minimumCount: nil, maximumCount: 2)
            }
        }
    }

    /// Two or three strings of different shapes (free, fixed choices, patterns), some of whose
    /// texts several of them take.
    static func textShapes(_ rng: inout SeededGenerator) -> [SchemaNode] {
        let shapes: [SchemaNode] = [.string(choices: nil, pattern: nil), .string(choices: ["x", "yz", "x y", "yes"], pattern: nil),
                                    .string(choices: ["say \"yes\""], pattern: nil), .string(choices: nil, pattern: "(yes|no)"),
                                    .string(choices: nil, pattern: "[a-z]+( [a-z]+)?"), .string(choices: nil, pattern: patterns.randomElement(using: &rng)!)]
        return Array(shapes.shuffled(using: &rng).prefix(Int.random(in: 2 ... 3, using: &rng)))
    }

    static func value(depth: Int, _ rng: inout SeededGenerator) -> SchemaNode {
        switch Int.random(in: 0 ..< (depth < 3 ? 11 : 7), using: &rng) {
        case 0: return .string(choices: nil, pattern: nil)
        case 1: return .string(choices: Array(["red", "green", "blue", "re", "dark \"blue\"", "ünï"].shuffled(using: &rng).prefix(Int.random(in: 1 ... 4, using: &rng))), pattern: nil)
        case 2: return .string(choices: nil, pattern: patterns.randomElement(using: &rng)!)
        case 3:
            let lo = Int.random(in: -50 ... 50, using: &rng)
            return .number(minimum: Double(lo), maximum: Double(lo + Int.random(in: 0 ... 120, using: &rng)), integral: true)
        case 4:
            let lo = Double(Int.random(in: -400 ... 400, using: &rng)) / 8
            return .number(minimum: Bool.random(using: &rng) ? lo : nil, maximum: lo + Double(Int.random(in: 0 ... 100, using: &rng)) / 4, integral: false)
        case 5: return .boolean
        case 6: return .number(minimum: nil, maximum: nil, integral: Bool.random(using: &rng))
        case 7:
            let lo = Int.random(in: 0 ... 2, using: &rng)
            return .array(element: value(depth: depth + 1, &rng), minimumCount: Bool.random(using: &rng) ? lo : nil,
                          maximumCount: Bool.random(using: &rng) ? lo + Int.random(in: 0 ... 3, using: &rng) : nil)
        case 8: return object(depth: depth, &rng)
        case 9:
            // A choice between shapes that start with different bytes.
            return .anyOf(name: "Shapes", description: nil, choices: distinctShapes(depth: depth, &rng))
        default: return structures(depth: depth, &rng)
        }
    }

    /// A choice between structures: properties they all share (same name and shape), then
    /// what tells them apart: the name of the next property, a tag among fixed values (string
    /// choices or booleans, optional or not, the same value in several branches or not), a
    /// value of another shape, text of another shape, a number of another range, or nothing
    /// (a branch may end where another goes on, or two may be the same).
    static func structures(depth: Int, _ rng: inout SeededGenerator) -> SchemaNode {
        let shared = (0 ..< Int.random(in: 0 ... 2, using: &rng)).map { i in
            SchemaProperty(name: "s\(i)", description: nil, node: value(depth: depth + 1, &rng),
                           isOptional: Int.random(in: 0 ..< 4, using: &rng) == 0)
        }
        let style = Int.random(in: 0 ..< 7, using: &rng)
        let parting = distinctShapes(depth: depth, &rng), texts = textShapes(&rng), offset = Int.random(in: 0 ..< 4, using: &rng)
        let arrayElement = Bool.random(using: &rng) ? value(depth: depth + 2, &rng) : nil
        let choices = (0 ..< Int.random(in: 2 ... 3, using: &rng)).map { i -> SchemaNode in
            guard case let .object(name, d, properties) = object(depth: depth + 1, &rng) else { fatalError("object") }
            var first: [SchemaProperty] = []
            switch style {
            case 0: first = [SchemaProperty(name: "kind\(i)", description: nil, node: .boolean, isOptional: false)]
            case 1:
                let tag: SchemaNode = Int.random(in: 0 ..< 4, using: &rng) == 0 ? .boolean
                    : .string(choices: Array(["circle", "square", "c\"q", "circ"].shuffled(using: &rng).prefix(Int.random(in: 1 ... 2, using: &rng))), pattern: nil)
                first = [SchemaProperty(name: "type", description: nil, node: tag, isOptional: Bool.random(using: &rng))]
            case 3:
                // The same property with a value of another shape in each branch.
                first = [SchemaProperty(name: "v", description: nil, node: parting[i % parting.count], isOptional: i == 0)]
            case 5:
                // The same property with a number of another range in each branch, read together.
                let ranges: [SchemaNode] = [.number(minimum: 0, maximum: 10, integral: true), .number(minimum: 5, maximum: 100, integral: true),
                                            .number(minimum: -1, maximum: 1, integral: false), .number(minimum: nil, maximum: nil, integral: true)]
                first = [SchemaProperty(name: "n", description: nil, node: ranges[(i + offset) % ranges.count], isOptional: false)]
            case 6:
                // The same property with an array in each branch: of elements that start with
                // different bytes, or of the same elements in other counts.
                let element = arrayElement ?? parting[i % parting.count]
                let lo = Int.random(in: 0 ... 2, using: &rng)
                first = [SchemaProperty(name: "v", description: nil, node: .array(element: element, minimumCount: Bool.random(using: &rng) ? lo : nil,
                                                                                   maximumCount: Bool.random(using: &rng) ? lo + Int.random(in: 0 ... 3, using: &rng) : nil),
                                        isOptional: i == 0 && Bool.random(using: &rng))]
            case 4:
                // The same property with text of another shape in each branch, read together.
                first = [SchemaProperty(name: "v", description: nil, node: texts[i % texts.count], isOptional: i == 0 && Bool.random(using: &rng))]
            default: break
            }
            // Each branch's own properties have names of their own, so branches never share a
            // property name with another shape.
            let own = properties.map { SchemaProperty(name: "b\(i)" + $0.name, description: nil, node: $0.node, isOptional: $0.isOptional) }
            return .object(name: name, description: d, properties: shared + first + (style == 2 && i == 1 ? [] : own))
        }
        return .anyOf(name: "Choice", description: nil, choices: choices)
    }
}

/// A property of the hand-written schemas in the grammar tests.
private func property(_ name: String, _ node: SchemaNode, optional: Bool = false) -> SchemaProperty {
    SchemaProperty(name: name, description: nil, node: node, isOptional: optional)
}

/// A structure of the hand-written schemas in the grammar tests.
private func object(_ properties: SchemaProperty...) -> SchemaNode { .object(name: "S", description: nil, properties: properties) }

/// Checks a value against a schema node, independently of the decoder.
enum SchemaCheck {
    static func problem(_ c: GeneratedContent, _ node: SchemaNode, path: String = "$") -> String? {
        switch (node, c.kind) {
        case let (.object(_, _, properties), .structure(values, keys)):
            guard keys == properties.map(\.name) else { return "\(path): keys \(keys), expected \(properties.map(\.name))" }
            for p in properties {
                let v = values[p.name]!
                if p.isOptional, v.kind == .null { continue }
                if let problem = problem(v, p.node, path: path + "." + p.name) { return problem }
            }
            return nil
        case let (.array(element, lo, hi), .array(items)):
            if let lo, items.count < lo { return "\(path): \(items.count) items, minimum \(lo)" }
            if let hi, items.count > hi { return "\(path): \(items.count) items, maximum \(hi)" }
            for (i, item) in items.enumerated() { if let p = problem(item, element, path: "\(path)[\(i)]") { return p } }
            return nil
        case let (.string(choices, pattern), .string(s)):
            if let choices, !choices.contains(s) { return "\(path): \(s) not in \(choices)" }
            if let pattern, (try? (try? Regex(pattern))?.matchingSemantics(.unicodeScalar).wholeMatch(in: s)) == nil {
                return "\(path): \(s) does not match /\(pattern)/"
            }
            return nil
        case let (.number(lo, hi, integral), .number(n)):
            if integral, n != n.rounded() { return "\(path): \(n) is not whole" }
            if n < (lo ?? -1e12) || n > (hi ?? 1e12) { return "\(path): \(n) outside \(lo ?? -1e12)...\(hi ?? 1e12)" }
            return nil
        case (.boolean, .bool): return nil
        case let (.anyOf(_, _, choices), _):
            return choices.contains { problem(c, $0, path: path) == nil } ? nil : "\(path): \(c.jsonString) matches no choice"
        default: return "\(path): \(c.jsonString) is not a \(node.kindName)"
        }
    }
}
