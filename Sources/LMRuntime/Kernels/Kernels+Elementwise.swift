import Foundation

extension Kernels {
    /// RMSNorm of each row: `out[r] = x[r] / sqrt(mean(x[r]²) + epsilon) * weight`.
    /// - Parameters:
    ///   - x: input `[T, dim]`.
    ///   - weight: gains `[1, dim]`.
    ///   - out: output `[T, dim]`; may be `x` itself.
    public static func rmsNorm(_ x: Matrix, weight: Matrix, epsilon: Float, into out: Matrix) {
        precondition(x.cols == weight.cols && out.rows == x.rows && out.cols == x.cols, "rmsNorm shape mismatch")
        parallelBands(x.rows, minimumPerBand: 32) { band in
            let n = x.cols, w = weight.base
            for r in band {
                let src = x.base + r * x.rowStride, dst = out.base + r * out.rowStride
                var sum: Float = 0
                for i in 0 ..< n { sum += src[i] * src[i] }
                let scale = 1 / (sum / Float(n) + epsilon).squareRoot()
                for i in 0 ..< n { dst[i] = w[i] * (scale * src[i]) }
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
    public static func rope(_ x: Matrix, headDim: Int, startPosition: Int, cos: Matrix, sin: Matrix) {
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

    /// SwiGLU in place: for each row of `[gate | up]` (`[T, 2H]`), writes
    /// `silu(gate) * up` into the gate half.
    /// - Parameter gateUp: `[T, 2H]`; columns `0..<H` receive the result.
    public static func swiGLU(_ gateUp: Matrix) {
        precondition(gateUp.cols % 2 == 0, "swiGLU needs [gate | up] columns")
        parallelBands(gateUp.rows, minimumPerBand: 8) { band in
            let h = gateUp.cols / 2, width = Lanes.scalarCount, vectorEnd = h - h % width
            for r in band {
                let g = gateUp.base + r * gateUp.rowStride, u = g + h
                for i in stride(from: 0, to: vectorEnd, by: width) {
                    let gate = Lanes(g + i)
                    (gate / (1 + fastExp(-gate)) * Lanes(u + i)).store(to: g + i)
                }
                for i in vectorEnd ..< h { g[i] = g[i] / (1 + Foundation.exp(-g[i])) * u[i] }
            }
        }
    }

    /// Softmax in place over the first `count` elements of row `row`.
    /// - Parameters:
    ///   - x: `[R, C]`.
    ///   - row: the row to normalise.
    ///   - count: how many leading elements take part (`1...C`).
    public static func softmax(_ x: Matrix, row: Int, count: Int) {
        precondition(count >= 1 && count <= x.cols, "softmax count out of range")
        softmax(x.base + row * x.rowStride, count: count)
    }

    /// Index of the largest element of a `[1, n]` row (the first one on ties).
    public static func argmax(_ x: Matrix) -> Int {
        precondition(x.rows == 1 && x.cols > 0, "argmax takes one non-empty row")
        let p = x.base
        var best = 0
        for i in 1 ..< x.cols where p[i] > p[best] { best = i }
        return best
    }

    /// Copies rows of `table` selected by `ids` into consecutive rows of `out`.
    /// - Parameters:
    ///   - table: `[V, dim]` (the token embedding).
    ///   - ids: row indices, each in `0..<V` (checked by the caller).
    ///   - out: `[ids.count, dim]`.
    public static func gatherRows(_ table: Matrix, ids: ArraySlice<Int>, into out: Matrix) {
        precondition(out.rows == ids.count && out.cols == table.cols, "gatherRows shape mismatch")
        for (r, id) in ids.enumerated() {
            (out.base + r * out.rowStride).update(from: table.base + id * table.rowStride, count: table.cols)
        }
    }

    /// Copies `source` into `destination` (same shape).
    public static func copy(_ source: Matrix, into destination: Matrix) {
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
        let width = Lanes.scalarCount, vectorEnd = count - count % width
        var maxLanes = Lanes(repeating: -.infinity)
        for i in stride(from: 0, to: vectorEnd, by: width) {
            let v = Lanes(p + i)
            maxLanes.replace(with: v, where: v .> maxLanes)
        }
        var maxValue = maxLanes.max()
        for i in vectorEnd ..< count where p[i] > maxValue { maxValue = p[i] }
        let m = Lanes(repeating: maxValue)
        var acc = Lanes(repeating: 0)
        for i in stride(from: 0, to: vectorEnd, by: width) {
            let e = fastExp(Lanes(p + i) - m)
            e.store(to: p + i)
            acc += e
        }
        var sum = acc.sum()
        for i in vectorEnd ..< count { p[i] = Foundation.exp(p[i] - maxValue); sum += p[i] }
        return sum
    }
}

/// The SIMD width the elementwise kernels use.
typealias Lanes = SIMD8<Float>

extension SIMD8 where Scalar == Float {
    @inline(__always) init(_ p: UnsafeMutablePointer<Float>) {
        self = UnsafeRawPointer(p).loadUnaligned(as: SIMD8<Float>.self)
    }

    @inline(__always) func store(to p: UnsafeMutablePointer<Float>) {
        UnsafeMutableRawPointer(p).storeBytes(of: self, as: SIMD8<Float>.self)
    }
}

/// `e^x` lane-wise, with a Cephes-style degree-5 polynomial (relative error about 2e-7,
/// inputs clamped to the float range), several times faster than scalar `expf`.
///
/// Rounding and the float-to-integer step use the 1.5 · 2²³ trick: adding it
/// leaves round-to-nearest(x) in the low mantissa bits, which keeps every step
/// a plain vector instruction (the generic SIMD conversions are not).
@inline(__always) func fastExp(_ x: Lanes) -> Lanes {
    let magic = Lanes(repeating: 0x1.8p23)
    // Clamp with compare-and-replace: pointwiseMin/Max are not lowered to vector instructions.
    var clamped = x
    clamped.replace(with: Lanes(repeating: 88.3), where: clamped .> Lanes(repeating: 88.3))
    clamped.replace(with: Lanes(repeating: -87.3), where: clamped .< Lanes(repeating: -87.3))
    let shifted = clamped * 1.442_695_04 + magic
    let n = shifted - magic
    var r = clamped - n * 0.693_359_375
    r = r - n * -2.121_944_4e-4
    var poly = Lanes(repeating: 1.987_569_15e-4)
    poly = poly * r + 1.398_199_95e-3
    poly = poly * r + 8.333_451_9e-3
    poly = poly * r + 4.166_579_59e-2
    poly = poly * r + 1.666_666_55e-1
    poly = poly * r + 5.000_000_1e-1
    let y = poly * (r * r) + r + 1
    // 2^n: the integer n sits in the low bits of `shifted`; move it into the exponent field
    // (a multiply by 2^23, because the generic SIMD shift is not vectorised).
    let integer = unsafeBitCast(shifted, to: SIMD8<Int32>.self) &- unsafeBitCast(magic, to: SIMD8<Int32>.self)
    return y * unsafeBitCast((integer &+ 127) &* (1 << 23), to: Lanes.self)
}
