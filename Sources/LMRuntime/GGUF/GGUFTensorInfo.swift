/// One entry of a GGUF file's tensor directory.
public struct GGUFTensorInfo: Sendable, Equatable {
    /// The tensor's name (`token_embd.weight`, `blk.0.attn_q.weight`, ...).
    public let name: String
    /// Dimensions in GGML order: the fastest-varying (a matrix's column count) first.
    public let dimensions: [Int]
    /// The encoding of its elements.
    public let type: GGUFTensorType
    /// Absolute byte offset of its data in the file.
    public let dataOffset: Int
    /// Bytes of data.
    public let byteCount: Int
    /// Byte offset of this entry in the directory (for error messages).
    public let infoOffset: Int

    /// Elements in the tensor.
    public var elementCount: Int { dimensions.reduce(1, *) }
}
