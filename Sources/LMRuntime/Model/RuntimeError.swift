/// Why a forward pass was refused. Nothing is computed or changed when one is thrown.
public enum RuntimeError: Error, Equatable, CustomStringConvertible {
    /// A token id outside `0..<vocabSize`, at `index` in the input.
    case tokenOutOfVocabulary(token: Int, index: Int, vocabSize: Int)
    /// The cache would grow past its capacity (at most the model's context length).
    case contextOverflow(cachedTokens: Int, newTokens: Int, capacity: Int)
    /// A forward pass needs at least one token.
    case emptyInput
    /// The cache was built for another model shape.
    case cacheShapeMismatch(expectedLayers: Int, expectedKVDim: Int, layers: Int, kvDim: Int)
    /// The cache could not grow: the system refused an allocation of this many bytes.
    case allocationFailed(bytes: Int)

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case let .tokenOutOfVocabulary(token, index, vocab):
            "token id \(token) at index \(index) is outside the vocabulary 0..<\(vocab)"
        case let .contextOverflow(cached, new, capacity):
            "\(cached) cached + \(new) new tokens exceed the cache capacity of \(capacity)"
        case .emptyInput: "a forward pass needs at least one token"
        case let .cacheShapeMismatch(el, ek, l, k):
            "the cache has \(l) layers of width \(k) but the model needs \(el) layers of width \(ek)"
        case let .allocationFailed(bytes): "the cache could not grow: allocating \(bytes) bytes failed"
        }
    }
}
