import LMRuntime

/// A direct transcription of llama2.c's `encode` loop (rescan every pair, merge the best,
/// repeat) used as the oracle for ``Tokenizer/encode(_:bos:eos:)``'s heap-based version.
public func referenceEncode(_ text: String, with tokenizer: Tokenizer) -> [Int] {
    var lookup: [[UInt8]: Int] = [:]
    for (id, piece) in tokenizer.pieces.enumerated() where lookup[piece] == nil { lookup[piece] = id }
    var tokens: [Int] = []
    if !text.isEmpty, let space = lookup[[0x20]] { tokens.append(space) }
    let bytes = Array(text.utf8)
    var i = 0
    while i < bytes.count {
        // One code point: a lead byte plus its continuation bytes (at most 4 bytes).
        var end = i + 1
        while end < bytes.count, bytes[end] & 0xC0 == 0x80, end - i < 4 { end += 1 }
        let codepoint = Array(bytes[i ..< end])
        if let id = lookup[codepoint] {
            tokens.append(id)
        } else {
            tokens += codepoint.map { Int($0) + tokenizer.byteTokenBase }
        }
        i = end
    }
    while true {
        var bestScore = -Float.greatestFiniteMagnitude, bestId = -1, bestIndex = -1
        for j in 0 ..< max(0, tokens.count - 1) {
            if let id = lookup[tokenizer.pieces[tokens[j]] + tokenizer.pieces[tokens[j + 1]]],
               tokenizer.scores[id] > bestScore {
                bestScore = tokenizer.scores[id]
                bestId = id
                bestIndex = j
            }
        }
        if bestIndex == -1 { break }
        tokens[bestIndex] = bestId
        tokens.remove(at: bestIndex + 1)
    }
    return [Tokenizer.bos] + tokens
}
