import LMRuntime

/// A tokenizer's vocabulary as the constrained decoder sees it: the bytes each token adds
/// to the text, and the tokens grouped by their first byte.
///
/// Control pieces (`<|end|>`, ...) and the tokenizer's ``Tokenizer/controlTokens`` (BOS, EOS,
/// `<unk>`, a byte-level vocabulary's control tokens) add no text and are never allowed inside a
/// structured value. Every byte has a single-byte token (the byte-fallback pieces, or a byte-level
/// vocabulary's byte alphabet), which is what lets the decoder always finish a value within its budget.
final class TokenVocabulary: Sendable {
    let bytes: [[UInt8]]
    let byFirstByte: [[Int32]]
    let count: Int
    var wordCount: Int { (count + 63) / 64 }

    init(_ tokenizer: Tokenizer) {
        let control = Set(ControlPieces.all.compactMap(tokenizer.id(of:))).union(tokenizer.controlTokens)
        var bytes: [[UInt8]] = []
        var byFirst = [[Int32]](repeating: [], count: 256)
        for id in 0 ..< tokenizer.vocabSize {
            // `previous: nil`: pieces keep their leading space (generation follows a marker, not BOS).
            let b = control.contains(id) ? [] : tokenizer.bytes(of: id, after: nil)
            bytes.append(b)
            if let first = b.first { byFirst[Int(first)].append(Int32(id)) }
        }
        self.bytes = bytes
        byFirstByte = byFirst
        count = tokenizer.vocabSize
    }
}
