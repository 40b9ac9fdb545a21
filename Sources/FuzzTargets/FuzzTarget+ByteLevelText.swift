import Foundation
import LMRuntime
import LMTestSupport

extension FuzzTarget {
    /// The test fixture's byte-level vocabulary under each pre-tokenizer, with the model's
    /// expression as ICU's regular-expression engine reads it (whitespace spelled as the
    /// `White_Space` property, which ICU's `\s` is not quite; contractions as llama.cpp spells them).
    static let byteLevelVocabularies: [(Tokenizer, [NSRegularExpression])] = {
        let contractions = #"'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]"#
        let gpt2 = #"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"#
        func llama3(_ numbers: String) -> String {
            #"(?:\#(contractions))|[^\r\n\p{L}\p{N}]?\p{L}+|\#(numbers)| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"#
        }
        let expressions = ["gpt-2": [gpt2], "smollm": [#"\p{N}"#, gpt2], "llama-bpe": [llama3(#"\p{N}{1,3}"#)], "qwen2": [llama3(#"\p{N}"#)]]
        let directory = Fixtures.packageRoot.appendingPathComponent("Tests/Fixtures/byte-level-bpe")
        return expressions.keys.sorted().map { pre in
            let tokenizer = try! Tokenizer(ggufAt: directory.appendingPathComponent("\(pre).gguf"))
            let regexes = expressions[pre]!.map {
                try! NSRegularExpression(pattern: $0.replacingOccurrences(of: #"\s"#, with: #"\p{White_Space}"#)
                    .replacingOccurrences(of: #"\S"#, with: #"\P{White_Space}"#))
            }
            return (tokenizer, regexes)
        }
    }()

    /// `text` cut as llama.cpp cuts it: at the user-defined token, then each expression in turn
    /// splits every piece so far into its matches and the unmatched runs between them.
    static func regexWords(_ text: String, _ expressions: [NSRegularExpression]) -> [String] {
        // The fixture's user-defined token is cut out first and stays whole.
        let token = "<tool_call>"
        var outside: [String] = [], rest = text as NSString
        while case let found = rest.range(of: token, options: .literal), found.location != NSNotFound {
            outside.append(rest.substring(to: found.location))
            outside.append(token)
            rest = rest.substring(from: found.location + found.length) as NSString
        }
        outside.append(rest as String)
        return outside.filter { !$0.isEmpty }.flatMap { $0 == token ? [token] : regexWords(in: $0, expressions) }
    }

    static func regexWords(in text: String, _ expressions: [NSRegularExpression]) -> [String] {
        var pieces = [text]
        for expression in expressions {
            pieces = pieces.flatMap { piece -> [String] in
                // UTF-16 ranges, as ICU gives them: a match may end inside a grapheme cluster.
                let ns = piece as NSString
                var out: [String] = [], last = 0
                for match in expression.matches(in: piece, range: NSRange(location: 0, length: ns.length)) {
                    let range = match.range
                    if last < range.location { out.append(ns.substring(with: NSRange(location: last, length: range.location - last))) }
                    if range.length > 0 { out.append(ns.substring(with: range)) }
                    last = range.location + range.length
                }
                if last < ns.length { out.append(ns.substring(from: last)) }
                return out
            }
        }
        return pieces
    }

    /// ICU's letters, numbers and whitespace, and the scalars Swift's tables put in each class.
    static let characterClasses = [#"\p{L}"#, #"\p{N}"#, #"\p{White_Space}"#].map { try! NSRegularExpression(pattern: $0) }

    /// Whether ICU and Swift's standard library put every scalar of `text` in the same class. They
    /// differ on characters assigned in Unicode versions one knows and the other does not (the
    /// first fuzz run found U+32451, a CJK Extension H letter of Unicode 15, unassigned to the ICU
    /// here), where the expression's words differ for that reason alone.
    static func unicodeTablesAgree(on text: String) -> Bool {
        let ns = text as NSString
        var offset = 0
        var scalars: [(offset: Int, scalar: Unicode.Scalar)] = []
        for scalar in text.unicodeScalars {
            scalars.append((offset, scalar))
            offset += scalar.utf16.count
        }
        let swiftClasses: [(Unicode.Scalar) -> Bool] = [
            { [.uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter].contains($0.properties.generalCategory) },
            { [.decimalNumber, .letterNumber, .otherNumber].contains($0.properties.generalCategory) },
            { $0.properties.isWhitespace },
        ]
        for (regex, inClass) in zip(characterClasses, swiftClasses) {
            let icu = Set(regex.matches(in: text, range: NSRange(location: 0, length: ns.length)).map(\.range.location))
            if icu != Set(scalars.filter { inClass($0.scalar) }.map(\.offset)) { return false }
        }
        return true
    }

    static func byteLevelTexts(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        let comparable = unicodeTablesAgree(on: text)
        for (tokenizer, expressions) in byteLevelVocabularies {
            let words = tokenizer.words(text).map { Array($0.unicodeScalars) }
            precondition(!comparable || words == regexWords(text, expressions).map { Array($0.unicodeScalars) },
                         "words of \(Array(text.unicodeScalars)) are not the expression's")
            precondition(words.joined().elementsEqual(text.unicodeScalars), "words of \(Array(text.unicodeScalars)) do not join to it")
            let ids = tokenizer.encode(text, bos: false)
            precondition(Array(tokenizer.decode(ids).utf8) == Array(text.utf8), "ids do not spell \(Array(text.utf8)) back")
            precondition(!ids.contains(where: tokenizer.controlTokens.contains), "text encoded to a control token")
        }
    }
}
