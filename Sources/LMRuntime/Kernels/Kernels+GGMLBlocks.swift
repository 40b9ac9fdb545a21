import Foundation

extension Kernels {
    /// Reads `matrix.rows × matrix.cols` weights encoded as `type`'s blocks at `byteOffset` into
    /// `matrix`, whose column count is a multiple of the block size (BF16 and the Q4, Q5 and K
    /// encodings; F32, F16 and Q8_0 have loaders of their own).
    package static func loadBlocks(_ type: GGUFTensorType, from data: Data, byteOffset: Int, into matrix: Matrix) {
        precondition(matrix.cols % type.blockSize == 0, "\(type.ggmlName) rows are whole blocks")
        let blocksPerRow = matrix.cols / type.blockSize, rowBytes = blocksPerRow * type.bytesPerBlock
        precondition(byteOffset >= 0 && byteOffset + matrix.rows * rowBytes <= data.count, "\(type.ggmlName) range outside the data")
        let block = GGMLBlocks.decoder(type)
        data.withUnsafeBytes { raw in
            for r in 0 ..< matrix.rows {
                let src = raw.baseAddress! + byteOffset + r * rowBytes, dst = matrix.base + r * matrix.rowStride
                for b in 0 ..< blocksPerRow { block(src + b * type.bytesPerBlock, dst + b * type.blockSize) }
            }
        }
    }
}

/// One block of each GGML encoding decoded to float32, weight by weight in the order
/// `ggml-common.h` lays them out. Every weight is its float32 operations one at a time (no fused
/// multiply-add), in the order of gguf-py's dequantizers, so the bits are theirs.
private enum GGMLBlocks {
    typealias Decoder = (UnsafeRawPointer, UnsafeMutablePointer<Float>) -> Void

    /// The block decoder of `type` (F32, F16 and Q8_0 have loaders of their own).
    static func decoder(_ type: GGUFTensorType) -> Decoder {
        switch type {
        case .bf16: bf16
        case .q4_0: q4_0
        case .q4_1: q4_1
        case .q5_0: q5_0
        case .q5_1: q5_1
        case .q2_K: q2_K
        case .q3_K: q3_K
        case .q4_K: q4_K
        case .q5_K: q5_K
        case .q6_K: q6_K
        case .f32, .f16, .q8_0: { _, _ in preconditionFailure("\(type.ggmlName) has a loader of its own") }
        }
    }

    @inline(__always) private static func byte(_ p: UnsafeRawPointer, _ at: Int) -> Int {
        Int(p.load(fromByteOffset: at, as: UInt8.self))
    }

    @inline(__always) private static func half(_ p: UnsafeRawPointer, _ at: Int) -> Float {
        Kernels.float(fromHalf: UInt16(littleEndian: p.loadUnaligned(fromByteOffset: at, as: UInt16.self)))
    }

    /// A bfloat16 is the top 16 bits of a float32.
    static func bf16(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        y[0] = Float(bitPattern: UInt32(UInt16(littleEndian: p.loadUnaligned(as: UInt16.self))) << 16)
    }

    /// `d`, then 16 bytes: weight j < 16 is byte j's low nibble, weight j + 16 its high one, less 8.
    static func q4_0(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        let d = half(p, 0)
        for j in 0 ..< 16 {
            let q = byte(p, 2 + j)
            y[j] = d * Float((q & 0xF) - 8)
            y[j + 16] = d * Float((q >> 4) - 8)
        }
    }

    /// `d`, `m`, then the nibbles as in Q4_0, unsigned: weight = d·q + m.
    static func q4_1(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        let d = half(p, 0), m = half(p, 2)
        for j in 0 ..< 16 {
            let q = byte(p, 4 + j)
            y[j] = d * Float(q & 0xF) + m
            y[j + 16] = d * Float(q >> 4) + m
        }
    }

    /// Weight j's fifth bit is bit j of the little-endian 32-bit word at `at`.
    @inline(__always) private static func fiveBit(_ p: UnsafeRawPointer, high at: Int, nibbles: Int, _ j: Int) -> Int {
        let high = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: at, as: UInt32.self))
        let nibble = j < 16 ? byte(p, nibbles + j) & 0xF : byte(p, nibbles + j - 16) >> 4
        return nibble | Int((high >> UInt32(j)) & 1) << 4
    }

    /// `d`, 32 fifth bits, 16 bytes of nibbles: weight = d·(q − 16).
    static func q5_0(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        let d = half(p, 0)
        for j in 0 ..< 32 { y[j] = d * Float(fiveBit(p, high: 2, nibbles: 6, j) - 16) }
    }

    /// `d`, `m`, 32 fifth bits, 16 bytes of nibbles: weight = d·q + m.
    static func q5_1(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        let d = half(p, 0), m = half(p, 2)
        for j in 0 ..< 32 { y[j] = d * Float(fiveBit(p, high: 4, nibbles: 8, j)) + m }
    }

    /// The two-bit field of weight `e` in a K-quant's 64 bytes at `at`: each half of the block
    /// (128 weights) has 32 bytes, and bits 2s…2s+1 of byte `l` hold its weight 32·s + l.
    @inline(__always) private static func twoBit(_ p: UnsafeRawPointer, _ at: Int, _ e: Int) -> Int {
        (byte(p, at + (e >> 7) * 32 + (e & 31)) >> (2 * ((e >> 5) & 3))) & 3
    }

    /// 16 bytes of scales (low nibble) and minimums (high nibble) for sub-blocks of 16, 64 bytes of
    /// two-bit `q`, then half `d` and `dmin`: weight = (d·scale)·q − dmin·minimum.
    static func q2_K(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        let d = half(p, 80), dmin = half(p, 82)
        for sub in 0 ..< 16 {
            let packed = byte(p, sub)
            let scale = d * Float(packed & 0xF), minimum = dmin * Float(packed >> 4)
            for e in sub * 16 ..< sub * 16 + 16 { y[e] = scale * Float(twoBit(p, 16, e)) - minimum }
        }
    }

    /// 32 bytes of third bits (bit b of byte l: weight 32·b + l; a clear bit subtracts 4), 64 bytes
    /// of two-bit `q`, 12 bytes holding 16 six-bit scales (less 32), then half `d`:
    /// weight = (d·scale)·q.
    static func q3_K(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        let d = half(p, 108)
        for sub in 0 ..< 16 {
            let low = (byte(p, 96 + (sub & 7)) >> (4 * (sub >> 3))) & 0xF
            let high = (byte(p, 104 + (sub & 3)) >> (2 * (sub >> 2))) & 3
            let scale = d * Float((low | high << 4) - 32)
            for e in sub * 16 ..< sub * 16 + 16 {
                let third = (byte(p, e & 31) >> (e >> 5)) & 1
                y[e] = scale * Float(twoBit(p, 32, e) - ((third ^ 1) << 2))
            }
        }
    }

    /// Sub-block `j`'s six-bit scale and minimum from the 12 bytes at `at` (Q4_K, Q5_K): bytes
    /// 0–3 and 4–7 hold the first four of each in their low six bits, bytes 8–11 the low nibbles
    /// of the last four, whose top two bits are those bytes' first four's top two.
    @inline(__always) private static func scaleAndMinimum(_ p: UnsafeRawPointer, _ at: Int, _ j: Int) -> (Int, Int) {
        if j < 4 { return (byte(p, at + j) & 63, byte(p, at + j + 4) & 63) }
        let packed = byte(p, at + j + 4)
        return ((packed & 0xF) | (byte(p, at + j - 4) >> 6) << 4, (packed >> 4) | (byte(p, at + j) >> 6) << 4)
    }

    /// Half `d` and `dmin`, 12 bytes of scales and minimums, 128 bytes of nibbles (each 64 weights
    /// take 32 bytes, low nibbles first): weight = (d·scale)·q − dmin·minimum.
    static func q4_K(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        kQuant(p, y, fifthBits: nil, nibbles: 16)
    }

    /// Q4_K with 32 bytes of fifth bits (bit j of byte l: weight 32·j + l) before the nibbles.
    static func q5_K(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        kQuant(p, y, fifthBits: 16, nibbles: 48)
    }

    @inline(__always) private static func kQuant(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>,
                                                 fifthBits: Int?, nibbles: Int) {
        let d = half(p, 0), dmin = half(p, 2)
        for j in 0 ..< 8 {
            let (s, m) = scaleAndMinimum(p, 4, j)
            let scale = d * Float(s), minimum = dmin * Float(m)
            let at = nibbles + (j >> 1) * 32, shift = 4 * (j & 1)
            for l in 0 ..< 32 {
                var q = (byte(p, at + l) >> shift) & 0xF
                if let fifthBits { q |= ((byte(p, fifthBits + l) >> j) & 1) << 4 }
                y[j * 32 + l] = scale * Float(q) - minimum
            }
        }
    }

    /// 128 bytes of low nibbles (each 128 weights take 64 bytes, low nibbles first), 64 bytes of
    /// two-bit high parts (as Q2_K's), 16 signed scales for sub-blocks of 16, then half `d`:
    /// weight = (d·scale)·(q − 32).
    static func q6_K(_ p: UnsafeRawPointer, _ y: UnsafeMutablePointer<Float>) {
        let d = half(p, 208)
        for sub in 0 ..< 16 {
            let scale = d * Float(Int8(truncatingIfNeeded: byte(p, 192 + sub)))
            for e in sub * 16 ..< sub * 16 + 16 {
                let low = (byte(p, (e >> 7) * 64 + (e & 63)) >> (4 * ((e >> 6) & 1))) & 0xF
                y[e] = scale * Float((low | twoBit(p, 128, e) << 4) - 32)
            }
        }
    }
}
