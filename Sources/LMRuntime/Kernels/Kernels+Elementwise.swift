import CKernels
import Foundation

extension Kernels {
    /// RMSNorm of each row: `out[r] = x[r] / sqrt(mean(x[r]²) + epsilon) * weight`.
    /// - Parameters:
    ///   - x: input `[T, dim]`.
    ///   - weight: gains `[1, dim]`.
    ///   - out: output `[T, dim]`; may be `x` itself.
    package static func rmsNorm(_ x: Matrix, weight: Matrix, epsilon: Float, into out: Matrix) {
        precondition(x.cols == weight.cols && out.rows == x.rows && out.cols == x.cols, "rmsNorm shape mismatch")
        parallelBands(x.rows, minimumPerBand: 32) { band in
            for r in band {
                kv_rmsnorm(out.base + r * out.rowStride, x.base + r * x.rowStride, weight.base, x.cols, epsilon)
            }
        }
    }

    /// Rotary position embedding in place, llama2.c's convention: adjacent pairs
    /// `(2i, 2i+1)` of every head are rotated by `position · θ_i`.
    /// - Parameters:
    ///   - x: `[T, heads * headDim]`; row `t` sits at position `startPosition + t`.
    ///   - headDim: elements per head (even).
    ///   - startPosition: position of row 0.
    ///   - cos: `[contextLength, headDim / 2]` table of `cos(position · θ_i)`.
    ///   - sin: the matching sine table.
    package static func rope(_ x: Matrix, headDim: Int, startPosition: Int, cos: Matrix, sin: Matrix) {
        precondition(x.cols % headDim == 0 && cos.cols * 2 == headDim, "rope shape mismatch")
        precondition(startPosition + x.rows <= cos.rows, "rope position beyond the table")
        parallelBands(x.rows, minimumPerBand: 32) { band in
            for r in band {
                let row = x.base + r * x.rowStride
                let c = cos.base + (startPosition + r) * cos.rowStride
                let s = sin.base + (startPosition + r) * sin.rowStride
                for head in stride(from: 0, to: x.cols, by: headDim) {
                    for i in 0 ..< headDim / 2 {
                        let a = row[head + 2 * i], b = row[head + 2 * i + 1]
                        row[head + 2 * i] = a * c[i] - b * s[i]
                        row[head + 2 * i + 1] = a * s[i] + b * c[i]
                    }
                }
            }
        }
    }

    /// Adds `bias` (`[1, q.cols + k.cols + v.cols]`) to every row of `q`, `k` and `v`, in that order of columns.
    package static func addBias(_ bias: Matrix, to q: Matrix, _ k: Matrix, _ v: Matrix) {
        precondition(bias.rows == 1 && bias.cols == q.cols + k.cols + v.cols && q.rows == k.rows && k.rows == v.rows, "bias shape mismatch")
        func add(_ b: UnsafeMutablePointer<Float>, to m: Matrix) {
            for r in 0 ..< m.rows {
                let row = m.base + r * m.rowStride
                for c in 0 ..< m.cols { row[c] += b[c] }
            }
        }
        add(bias.base, to: q)
        add(bias.base + q.cols, to: k)
        add(bias.base + q.cols + k.cols, to: v)
    }

    /// SwiGLU in place: for each row of `[gate | up]` (`[T, 2H]`), writes
    /// `silu(gate) * up` into the gate half.
    /// - Parameter gateUp: `[T, 2H]`; columns `0..<H` receive the result.
    package static func swiGLU(_ gateUp: Matrix) {
        precondition(gateUp.cols % 2 == 0, "swiGLU needs [gate | up] columns")
        parallelBands(gateUp.rows, minimumPerBand: 8) { band in
            let h = gateUp.cols / 2
            for r in band {
                let g = gateUp.base + r * gateUp.rowStride
                kv_swiglu(g, g + h, h)
            }
        }
    }

    /// Softmax in place over the first `count` elements of row `row`.
    /// - Parameters:
    ///   - x: `[R, C]`.
    ///   - row: the row to normalise.
    ///   - count: how many leading elements take part (`1...C`).
    package static func softmax(_ x: Matrix, row: Int, count: Int) {
        precondition(count >= 1 && count <= x.cols, "softmax count out of range")
        softmax(x.base + row * x.rowStride, count: count)
    }

    /// Index of the largest element of a `[1, n]` row (the first one on ties).
    package static func argmax(_ x: Matrix) -> Int {
        precondition(x.rows == 1 && x.cols > 0, "argmax takes one non-empty row")
        let p = x.base
        var best = 0
        for i in 1 ..< x.cols where p[i] > p[best] { best = i }
        return best
    }

    /// Sets to -∞ every element of a `[1, n]` row whose bit in `allowed` is clear (bit `i % 64`
    /// of word `i / 64`): what guided generation does to the logits before sampling.
    package static func mask(_ x: Matrix, allowed: [UInt64]) {
        precondition(x.rows == 1 && allowed.count * 64 >= x.cols, "mask needs one bit per element")
        let p = x.base
        for word in 0 ..< (x.cols + 63) / 64 {
            let bits = allowed[word]
            if bits == ~0 { continue }
            let start = word * 64, end = min(x.cols, start + 64)
            if bits == 0 {
                (p + start).update(repeating: -.infinity, count: end - start)
                continue
            }
            for i in start ..< end where bits & (1 << UInt64(i - start)) == 0 { p[i] = -.infinity }
        }
    }

    /// Copies rows of `table` selected by `ids` into consecutive rows of `out`.
    /// - Parameters:
    ///   - table: `[V, dim]` (the token embedding).
    ///   - ids: row indices, each in `0..<V` (checked by the caller).
    ///   - out: `[ids.count, dim]`.
    package static func gatherRows(_ table: Matrix, ids: ArraySlice<Int>, into out: Matrix) {
        precondition(out.rows == ids.count && out.cols == table.cols, "gatherRows shape mismatch")
        for (r, id) in ids.enumerated() {
            (out.base + r * out.rowStride).update(from: table.base + id * table.rowStride, count: table.cols)
        }
    }

    /// Copies `source` into `destination` (same shape).
    package static func copy(_ source: Matrix, into destination: Matrix) {
        precondition(source.rows == destination.rows && source.cols == destination.cols, "copy shape mismatch")
        for r in 0 ..< source.rows {
            (destination.base + r * destination.rowStride).update(from: source.base + r * source.rowStride,
                                                                  count: source.cols)
        }
    }

    static func softmax(_ p: UnsafeMutablePointer<Float>, count: Int) {
        let inverse = 1 / exponentiate(p, count: count), scale = Lanes(repeating: inverse)
        let width = Lanes.scalarCount, vectorEnd = count - count % width
        for i in stride(from: 0, to: vectorEnd, by: width) { (Lanes(p + i) * scale).store(to: p + i) }
        for i in vectorEnd ..< count { p[i] *= inverse }
    }

    /// Replaces `p[i]` by `exp(p[i] - max)` over `count` elements and returns their sum
    /// (the unnormalised softmax; the sum is at least 1).
    static func exponentiate(_ p: UnsafeMutablePointer<Float>, count: Int) -> Float {
        kv_exp_shifted_sum(p, count)
    }

    /// Whether the elementwise kernels run their AVX2+FMA bodies on this machine.
    package static var usesAVX2: Bool { kv_uses_avx2() != 0 }

    /// Whether projections over half weights run the AVX2+FMA+F16C bodies.
    package static var usesF16C: Bool { kv_uses_f16c() != 0 }

    /// The widest body the skinny projection kernels and the few-query attention use: `avx512`
    /// (packed weights, attention products and exponentials on a CPU with AVX-512 F, DQ and VL,
    /// unless `KVSESSION_AVX512=0`), `avx2` or `portable`.
    package static var skinnyKernels: String {
        kv_uses_skinny_avx512() != 0 ? "avx512" : usesAVX2 ? "avx2" : "portable"
    }

    /// Where the skinny and attention kernels' software prefetches land: `L2` (PREFETCHT1; by
    /// default on the AMD Zen 4 family, unless `KVSESSION_PREFETCH_L2=0`) or `L1` (PREFETCHT0).
    package static var prefetchLevel: String { kv_prefetches_to_l2() != 0 ? "L2" : "L1" }

    /// This AMD CPU's Zen generation (1 for Zen and Zen+, 2 to 5), or 0 for any other CPU: the kernel
    /// defaults measured per core (prefetch level, decode streams, the half split tile, the
    /// half conversion threshold) follow it.
    package static var amdZenGeneration: Int { Int(kv_amd_zen_generation()) }

    /// How many streams of weights each thread's share of a decode step reads at once: 1 (the
    /// AVX-512 bodies reading one group of rows at a time; by default on the AMD Zen 4 family,
    /// unless `KVSESSION_DECODE_ONE_STREAM=0`) or 2 (two groups side by side).
    package static var decodeStreams: Int { kv_uses_skinny_avx512() != 0 && kv_decodes_one_stream() != 0 ? 1 : 2 }

    /// Whether tiles of more than twelve float32 activation rows take two groups of weight rows at a
    /// time (the AVX-512 bodies; by default on Intel's Emerald Rapids, `KVSESSION_PAIR_TILES=0` or
    /// `1` chooses) rather than one.
    package static var pairTilesBeyondTwelveRows: Bool { kv_uses_skinny_pair_tiles() != 0 }

    /// Whether few-query attention's weighted values over 12 or more stacked query rows take each key
    /// tile 32 keys at a time (the AVX-512 bodies; by default on Intel's Emerald Rapids,
    /// `KVSESSION_VALUE_CHUNKS=0` or `1` chooses) rather than from a dense copy of the value rows.
    package static var attentionValueChunks: Bool { kv_uses_attention_value_chunks() != 0 }
}

/// The SIMD width of the Swift-side vector loops.
typealias Lanes = SIMD8<Float>

extension SIMD8 where Scalar == Float {
    @inline(__always) init(_ p: UnsafeMutablePointer<Float>) {
        self = UnsafeRawPointer(p).loadUnaligned(as: SIMD8<Float>.self)
    }

    @inline(__always) func store(to p: UnsafeMutablePointer<Float>) {
        UnsafeMutableRawPointer(p).storeBytes(of: self, as: SIMD8<Float>.self)
    }
}
