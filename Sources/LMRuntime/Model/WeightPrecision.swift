/// How a model keeps its weight matrices in memory.
///
/// Projections and the embedding/classifier are what a decode step or a short prefill streams
/// from DRAM, so their element size sets the speed of every cache-hit turn. Norm gains and the
/// RoPE tables stay float32 whatever the precision.
public enum WeightPrecision: String, Codable, Sendable, CaseIterable {
    /// IEEE single precision: 4 bytes a weight, the arithmetic of llama2.c's `run.c`.
    case f32
    /// IEEE half precision: 2 bytes a weight, converted to float32 in registers (F16C) for short
    /// passes, and per block of rows to float32 scratch for long prefills (which stay on sgemm).
    /// Each weight is rounded once, to the nearest half; the arithmetic after that is float32.
    case f16

    /// Bytes one weight takes.
    public var bytesPerWeight: Int { self == .f32 ? 4 : 2 }
}
