/// Why a GGUF file could not be read or used. Every case names the field or tensor and, where
/// the problem sits in the file, its byte offset.
public enum GGUFError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file does not start with `GGUF`.
    case badMagic(found: [UInt8])
    /// A GGUF version other than 3 (versions 1 and 2 differ in their integer widths).
    case unsupportedVersion(UInt32)
    /// The file ends inside `field`, which starts at `byteOffset`.
    case truncated(field: String, byteOffset: Int)
    /// `field` at `byteOffset` holds a value the format or the model forbids.
    case invalidField(field: String, byteOffset: Int, reason: String)
    /// A metadata key the model needs is absent.
    case missingKey(String)
    /// `general.architecture` names a model family this runtime does not run.
    case unsupportedArchitecture(String)
    /// A tensor stored in a GGML type the loader does not decode (the raw type id is kept).
    case unsupportedTensorType(tensor: String, type: UInt32, byteOffset: Int)
    /// A tensor whose dimensions disagree with the metadata (GGML order: fastest dimension first).
    case shapeMismatch(tensor: String, expected: [Int], found: [Int], byteOffset: Int)
    /// A tensor the architecture needs is absent.
    case missingTensor(String)
    /// A tensor's data runs past the end of the file.
    case truncatedTensorData(tensor: String, byteOffset: Int, byteCount: Int, fileBytes: Int)
    /// The vocabulary cannot be used by this runtime's tokenizer (it needs llama2.c's layout).
    case unsupportedVocabulary(String)

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case let .badMagic(found): "not a GGUF file: the first bytes are \(found.map { String($0, radix: 16) }) instead of 'GGUF'"
        case let .unsupportedVersion(version): "GGUF version \(version) is not supported (only version 3)"
        case let .truncated(field, offset): "the file ends inside \(field) (which starts at byte \(offset))"
        case let .invalidField(field, offset, reason): "\(field) at byte \(offset): \(reason)"
        case let .missingKey(key): "metadata key '\(key)' is missing"
        case let .unsupportedArchitecture(name): "architecture '\(name)' is not supported (only 'llama')"
        case let .unsupportedTensorType(tensor, type, offset):
            "tensor '\(tensor)' (described at byte \(offset)) has GGML type \(type); supported: "
                + GGUFTensorType.allCases.map { "\($0.ggmlName) (\($0.rawValue))" }.joined(separator: ", ")
        case let .shapeMismatch(tensor, expected, found, offset):
            "tensor '\(tensor)' (described at byte \(offset)) has shape \(found), the metadata implies \(expected)"
        case let .missingTensor(name): "tensor '\(name)' is missing"
        case let .truncatedTensorData(tensor, offset, count, fileBytes):
            "tensor '\(tensor)' needs bytes \(offset)..<\(offset + count) but the file has \(fileBytes)"
        case let .unsupportedVocabulary(reason): "unsupported vocabulary: \(reason)"
        }
    }
}
