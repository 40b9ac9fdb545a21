/// What a byte-level BPE vocabulary (GGUF `tokenizer.ggml.model` "gpt2": GPT-2, Llama 3, SmolLM,
/// Qwen2) adds to a ``Tokenizer``: its pre-tokenizer, its ranked merges, and its tokens as stored.
///
/// Such a vocabulary spells every byte as one printable character (GPT-2's byte alphabet: the
/// printable Latin-1 bytes stand for themselves, the other 68 for U+0100 onwards in byte order),
/// so every token is a string of those characters, and every text encodes: a word starts as one
/// token per UTF-8 byte, then the adjacent pair with the lowest merge rank (leftmost on ties) is
/// merged until no ranked pair is left.
struct ByteLevelBPE: Sendable {
    /// How text is cut into words.
    let preTokenizer: PreTokenizer
    /// The merges by the ids of the pair: rank (lower merges first) and the merged token's id.
    let merges: [UInt64: (rank: Int32, merged: Int32)]
    /// The token of each byte.
    let byteTokens: [Int32]
    /// The tokens as the file stores them (byte-alphabet strings), and the merges, for writing back.
    let storedTokens: [String]
    let storedMerges: [String]
    /// GGUF token type per token (1 normal, 3 control, ...), for writing back.
    let tokenTypes: [Int32]
    /// User-defined tokens (type 4) by their text's bytes, longest first (ties by id): found in
    /// text before pre-tokenizing, as llama.cpp and Hugging Face's added tokens are.
    let userTokens: [(bytes: [UInt8], id: Int)]

    /// `text`'s bytes cut at every occurrence of a user-defined token: each longest token first
    /// splits what is still plain text at its leftmost, non-overlapping occurrences (llama.cpp's
    /// order). Plain runs come back with `id` nil.
    func splitAtUserTokens(_ text: [UInt8]) -> [(bytes: ArraySlice<UInt8>, id: Int?)] {
        var fragments: [(bytes: ArraySlice<UInt8>, id: Int?)] = [(text[...], nil)]
        for (token, id) in userTokens where !token.isEmpty {
            fragments = fragments.flatMap { fragment -> [(bytes: ArraySlice<UInt8>, id: Int?)] in
                guard fragment.id == nil else { return [fragment] }
                var out: [(bytes: ArraySlice<UInt8>, id: Int?)] = []
                let bytes = fragment.bytes
                var start = bytes.startIndex, i = bytes.startIndex
                while i + token.count <= bytes.endIndex {
                    if bytes[i ..< i + token.count].elementsEqual(token) {
                        if start < i { out.append((bytes[start ..< i], nil)) }
                        out.append((bytes[i ..< i + token.count], id))
                        i += token.count
                        start = i
                    } else {
                        i += 1
                    }
                }
                if start < bytes.endIndex { out.append((bytes[start...], nil)) }
                return out
            }
        }
        return fragments
    }

    /// GPT-2's byte alphabet: the character that stands for each byte.
    static let alphabet: [Unicode.Scalar] = {
        var next: UInt32 = 256
        return (0 ... 255).map { (byte: UInt32) -> Unicode.Scalar in
            if (33 ... 126).contains(byte) || (161 ... 172).contains(byte) || (174 ... 255).contains(byte) {
                return Unicode.Scalar(byte)!
            }
            defer { next += 1 }
            return Unicode.Scalar(next)!
        }
    }()

    /// The byte each alphabet character stands for.
    static let alphabetBytes: [Unicode.Scalar: UInt8] = Dictionary(uniqueKeysWithValues: alphabet.enumerated().map { ($1, UInt8($0)) })

    /// The bytes a stored token stands for: each alphabet character its byte, any other character
    /// (a control token's text may hold some) its own UTF-8.
    static func bytes(ofStored token: String) -> [UInt8] {
        var out: [UInt8] = []
        for scalar in token.unicodeScalars {
            if let byte = alphabetBytes[scalar] { out.append(byte) } else { out += Array(String(scalar).utf8) }
        }
        return out
    }

    /// A stored token string for `bytes` (the inverse of ``bytes(ofStored:)`` on alphabet strings).
    static func stored(_ bytes: [UInt8]) -> String {
        var s = String.UnicodeScalarView()
        for byte in bytes { s.append(alphabet[Int(byte)]) }
        return String(s)
    }
}
