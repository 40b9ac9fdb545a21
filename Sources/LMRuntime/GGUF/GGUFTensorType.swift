/// The GGML tensor encodings this runtime reads: everything is decoded to float32 at load, the
/// precision the transformer computes in. It writes F32, F16 and Q8_0 (``isWritable``).
///
/// The block encodings' layouts and arithmetic are llama.cpp's (`ggml-common.h`); decoding is
/// checked bit for bit against gguf-py's numpy dequantizers (`Tests/Fixtures/ggml-blocks.gguf`).
/// Each weight is computed in float32 one operation at a time, in the order those dequantizers
/// use, so a build of llama.cpp that fuses a multiply and an add may differ in the last bit.
public enum GGUFTensorType: UInt32, Sendable, CaseIterable {
    /// IEEE float32.
    case f32 = 0
    /// IEEE half precision.
    case f16 = 1
    /// Blocks of 32: a half scale `d`, then 32 four-bit `q` (low nibbles first); weight = d·(q − 8).
    case q4_0 = 2
    /// Blocks of 32: half `d` and `m`, then 32 four-bit `q`; weight = d·q + m.
    case q4_1 = 3
    /// Blocks of 32: half `d`, 32 fifth bits, 32 four-bit `q`; weight = d·(q − 16).
    case q5_0 = 6
    /// Blocks of 32: half `d` and `m`, 32 fifth bits, 32 four-bit `q`; weight = d·q + m.
    case q5_1 = 7
    /// Blocks of 32: a half-precision scale `d`, then 32 signed bytes `q`; weight = d·q.
    case q8_0 = 8
    /// Super-blocks of 256: 16 sub-blocks of 16 with four-bit scales and minimums, two-bit `q`.
    case q2_K = 10
    /// Super-blocks of 256: 16 sub-blocks of 16 with six-bit signed scales, three-bit `q`.
    case q3_K = 11
    /// Super-blocks of 256: 8 sub-blocks of 32 with six-bit scales and minimums, four-bit `q`.
    case q4_K = 12
    /// Super-blocks of 256: 8 sub-blocks of 32 with six-bit scales and minimums, five-bit `q`.
    case q5_K = 13
    /// Super-blocks of 256: 16 sub-blocks of 16 with eight-bit signed scales, six-bit `q`.
    case q6_K = 14
    /// bfloat16: the top half of a float32.
    case bf16 = 30

    /// Weights per block along the fastest dimension.
    public var blockSize: Int {
        switch self {
        case .f32, .f16, .bf16: 1
        case .q4_0, .q4_1, .q5_0, .q5_1, .q8_0: 32
        case .q2_K, .q3_K, .q4_K, .q5_K, .q6_K: 256
        }
    }

    /// Bytes per block.
    public var bytesPerBlock: Int {
        switch self {
        case .f32: 4
        case .f16, .bf16: 2
        case .q4_0: 18
        case .q4_1: 20
        case .q5_0: 22
        case .q5_1: 24
        case .q8_0: 34
        case .q2_K: 84
        case .q3_K: 110
        case .q4_K: 144
        case .q5_K: 176
        case .q6_K: 210
        }
    }

    /// Whether ``ModelWeights/ggufData(tokenizer:tensorType:)`` and
    /// ``LowRankAdapter/ggufData(tensorType:)`` write this encoding: F32, F16 and Q8_0. The others
    /// are read only (a K-quant quantizer is a search for scales, not a rounding).
    public var isWritable: Bool { self == .f32 || self == .f16 || self == .q8_0 }

    /// The name GGML gives the encoding (`F32`, `Q4_K`, ...).
    public var ggmlName: String {
        switch self {
        case .f32: "F32"
        case .f16: "F16"
        case .bf16: "BF16"
        case .q4_0: "Q4_0"
        case .q4_1: "Q4_1"
        case .q5_0: "Q5_0"
        case .q5_1: "Q5_1"
        case .q8_0: "Q8_0"
        case .q2_K: "Q2_K"
        case .q3_K: "Q3_K"
        case .q4_K: "Q4_K"
        case .q5_K: "Q5_K"
        case .q6_K: "Q6_K"
        }
    }

    /// The encoding a matrix whose rows hold `rowLength` weights is written in when `self` is
    /// asked for: `self`, except Q8_0 for rows that are not whole blocks, which are written as F16
    /// (as llama.cpp's quantizer does).
    package func encoding(forRowLength rowLength: Int) -> GGUFTensorType {
        self == .q8_0 && rowLength % blockSize != 0 ? .f16 : self
    }
}
