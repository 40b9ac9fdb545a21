/// The GGML tensor encodings this runtime reads and writes. Everything is dequantised to
/// float32 at load, the precision the transformer runs in.
public enum GGUFTensorType: UInt32, Sendable, CaseIterable {
    /// IEEE float32.
    case f32 = 0
    /// IEEE half precision.
    case f16 = 1
    /// Blocks of 32 weights: a half-precision scale `d`, then 32 signed bytes `q`; weight = d·q.
    case q8_0 = 8

    /// Weights per block along the fastest dimension.
    public var blockSize: Int { self == .q8_0 ? 32 : 1 }

    /// Bytes per block.
    public var bytesPerBlock: Int {
        switch self {
        case .f32: 4
        case .f16: 2
        case .q8_0: 34
        }
    }

    /// The encoding a matrix whose rows hold `rowLength` weights is written in when `self` is
    /// asked for: `self`, except Q8_0 for rows that are not whole blocks, which are written as F16
    /// (as llama.cpp's quantizer does).
    package func encoding(forRowLength rowLength: Int) -> GGUFTensorType {
        self == .q8_0 && rowLength % blockSize != 0 ? .f16 : self
    }
}
