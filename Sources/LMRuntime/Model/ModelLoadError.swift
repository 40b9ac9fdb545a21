import Foundation

/// Why a model, config or tokenizer could not be loaded. Each case carries the numbers needed to act.
public enum ModelLoadError: Error, Equatable, CustomStringConvertible {
    /// The file does not exist or cannot be read.
    case unreadable(path: String, reason: String)
    /// The file ends before the data its header promises.
    case truncated(path: String, expectedBytes: Int, actualBytes: Int)
    /// The dimensions are impossible (zero, negative, heads not dividing dim, ...).
    case invalidDimensions(String)
    /// A config file is not valid JSON for ``ModelConfig``.
    case invalidConfig(path: String, reason: String)
    /// A tokenizer file is malformed at `byteOffset`.
    case corruptTokenizer(path: String, byteOffset: Int, reason: String)
    /// No bundled config has this name.
    case unknownModel(name: String, available: [String])
    /// The tokenizer and the model disagree on the vocabulary.
    case vocabularyMismatch(modelVocabSize: Int, tokenizerVocabSize: Int)
    /// Running the model would need more memory than the limit (``MemoryLimit``); nothing was allocated.
    case exceedsMemoryLimit(ResourceEstimate, limitBytes: Int)
    /// The system refused an allocation of this many bytes.
    case allocationFailed(bytes: Int)
    /// A GGUF file is malformed or describes a model this runtime cannot run.
    case gguf(path: String, GGUFError)
    /// A ``LowRankAdapter`` was made for other base weights than the ones it is merged into.
    case incompatibleAdapter(name: String, baseFingerprint: String, modelFingerprint: String)
    /// Converting to half precision, or writing halfs, would turn weights of this tensor
    /// (llama.cpp's name) infinite: `count` finite weights of magnitude 65,520 or more, the largest
    /// `largest`. Nothing was converted or written.
    case beyondHalfRange(tensor: String, count: Int, largest: Float)
    /// Writing this tensor (llama.cpp's name) as Q8_0 would give `blocks` blocks of 32 weights an
    /// infinite half scale, turning all their weights infinite or NaN: each holds a finite weight
    /// of magnitude 8,321,040 (65,520 × 127) or more, the largest `largest`. Nothing was written.
    case beyondQ8_0Range(tensor: String, blocks: Int, largest: Float)
    /// Writing was asked for in an encoding the package reads but does not write (see
    /// ``GGUFTensorType/isWritable``). Nothing was written.
    case unwritableEncoding(GGUFTensorType)
    /// A llama2.c checkpoint was asked for a model it cannot describe: its header holds the
    /// dimensions only, and its reader (llama2.c's too) assumes RoPE base 10,000, no frequency
    /// factors and RMSNorm epsilon 1e-5. Nothing was written.
    case unrepresentableInCheckpoint(String)

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case let .unreadable(path, reason): "cannot read \(path): \(reason)"
        case let .truncated(path, expected, actual):
            "\(path) is truncated: the header implies \(expected) bytes but the file has \(actual)"
        case let .invalidDimensions(reason): "impossible model dimensions: \(reason)"
        case let .invalidConfig(path, reason): "invalid model config \(path): \(reason)"
        case let .corruptTokenizer(path, offset, reason): "corrupt tokenizer \(path) at byte \(offset): \(reason)"
        case let .unknownModel(name, available):
            "no bundled model named '\(name)'; available: \(available.joined(separator: ", "))"
        case let .vocabularyMismatch(model, tokenizer):
            "the model has \(model) vocabulary entries but the tokenizer has \(tokenizer)"
        case let .exceedsMemoryLimit(estimate, limit):
            "running the model needs \(estimate), more than the limit of \(limit / 1_000_000) MB (MemoryLimit.bytes)"
                + (estimate.contextKVBytes > estimate.weightBytes
                    ? "; most of it is K/V for the whole context: give the model fewer positions (contextLength:, kvbench --context)" : "")
        case let .allocationFailed(bytes): "could not allocate \(bytes) bytes"
        case let .gguf(path, error): "GGUF file \(path): \(error)"
        case let .incompatibleAdapter(name, base, model):
            "adapter '\(name)' was made for the base weights \(base.prefix(16))…, not these (\(model.prefix(16))…)"
        case let .beyondHalfRange(tensor, count, largest):
            "\(count) weight\(count == 1 ? "" : "s") of \(tensor) (the largest of magnitude \(largest)) "
                + "would become infinite as IEEE halfs, whose range ends at ±65,504: keep this model in f32"
        case let .unrepresentableInCheckpoint(what):
            "a llama2.c checkpoint cannot hold \(what); write GGUF instead"
        case let .unwritableEncoding(type):
            "\(type.ggmlName) is read but not written; write F32, F16 or Q8_0"
        case let .beyondQ8_0Range(tensor, blocks, largest):
            "\(blocks) Q8_0 block\(blocks == 1 ? "" : "s") of \(tensor) (the largest weight of magnitude \(largest)) "
                + "would need a scale beyond the IEEE half range (weights below 8,321,040 fit): keep this model in f32"
        }
    }
}

extension ModelLoadError {
    /// Why `matrix`, the tensor `tensor`, would not be written finite in the GGUF encoding
    /// `requested` (as it applies to its rows), or nil when it would.
    static func encodingOverflow(tensor: String, _ matrix: WeightMatrix, as requested: GGUFTensorType) -> ModelLoadError? {
        switch requested.encoding(forRowLength: matrix.cols) {
        case .f32: return nil
        case .bf16, .q4_0, .q4_1, .q5_0, .q5_1, .q2_K, .q3_K, .q4_K, .q5_K, .q6_K: return nil   // never written
        case .f16:
            let overflow = Kernels.halfOverflow(matrix)
            return overflow.count > 0 ? .beyondHalfRange(tensor: tensor, count: overflow.count, largest: overflow.largest) : nil
        case .q8_0:
            guard matrix.precision == .f32 else { return nil }   // a half's block scale is at most 65,504 / 127
            let overflow = Kernels.q8_0ScaleOverflow(matrix.floatMatrix())
            return overflow.count > 0 ? .beyondQ8_0Range(tensor: tensor, blocks: overflow.count, largest: overflow.largest) : nil
        }
    }

    /// The bytes of the file at `url`, memory-mapped.
    /// - Throws: ``unreadable(path:reason:)`` when it cannot be read.
    static func mappedContents(of url: URL) throws(ModelLoadError) -> Data {
        do { return try Data(contentsOf: url, options: .alwaysMapped) } catch {
            throw .unreadable(path: url.path, reason: error.localizedDescription)
        }
    }
}
