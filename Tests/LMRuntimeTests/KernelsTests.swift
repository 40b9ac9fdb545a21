import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Kernels against plain-Swift definitions of the same maths.
struct KernelsTests {
    static func random(_ rows: Int, _ cols: Int, seed: UInt64) -> Matrix {
        let m = Matrix.zeros(rows: rows, cols: cols)
        Kernels.fillUniform(m, seed: seed, scale: 1)
        return m
    }

    @Test(arguments: [(1, 5, 7), (3, 4, 2), (9, 16, 33)])
    func matmul_transposedMatchesNaiveProduct(m: Int, n: Int, k: Int) {
        let a = Self.random(m, k, seed: 1), b = Self.random(n, k, seed: 2), c = Self.random(m, n, seed: 3)
        let before = c.toArray()
        Kernels.matmul(a, transposed: b, into: c, alpha: 0.5, beta: 1)
        for i in 0 ..< m {
            for j in 0 ..< n {
                let dot = (0 ..< k).map { a[i, $0] * b[j, $0] }.reduce(0, +)
                #expect(abs(c[i, j] - (0.5 * dot + before[i * n + j])) < 1e-4)
            }
        }
    }

    @Test(arguments: [(1, 6, 3), (4, 5, 8)])
    func matmul_plainMatchesNaiveProductOnStridedViews(m: Int, k: Int, n: Int) {
        let wide = Self.random(m, k + 3, seed: 4), b = Self.random(k, n + 2, seed: 5)
        let a = wide.columns(1 ..< k + 1), bv = b.columns(0 ..< n), c = Matrix.zeros(rows: m, cols: n)
        Kernels.matmul(a, bv, into: c)
        for i in 0 ..< m {
            for j in 0 ..< n {
                let dot = (0 ..< k).map { a[i, $0] * bv[$0, j] }.reduce(0, +)
                #expect(abs(c[i, j] - dot) < 1e-4)
            }
        }
    }

    @Test func softmax_matchesExactAndSumsToOne() {
        for count in [1, 2, 7, 8, 9, 33] {
            let x = Self.random(1, 40, seed: UInt64(count))
            for i in 0 ..< 40 { x[0, i] *= 30 }
            let original = x.toArray()
            Kernels.softmax(x, row: 0, count: count)
            let maxValue = original.prefix(count).max()!
            let z = original.prefix(count).map { exp(Double($0 - maxValue)) }.reduce(0, +)
            for i in 0 ..< count {
                #expect(abs(Double(x[0, i]) - exp(Double(original[i] - maxValue)) / z) < 1e-6)
            }
            #expect(Array(x.toArray()[count...]) == Array(original[count...]))   // untouched
        }
    }

    @Test func swiGLU_matchesDefinitionIncludingExtremes() {
        let x = Matrix(rows: 1, cols: 20, values: [-100, -20, -3, -1, 0, 0.5, 2, 20, 90, 1e-3] + Array(repeating: 1.5, count: 10))
        let original = x.toArray()
        Kernels.swiGLU(x)
        for i in 0 ..< 10 {
            let g = Double(original[i]), u = Double(original[10 + i])
            let expected = g / (1 + exp(-g)) * u
            #expect(abs(Double(x[0, i]) - expected) <= 1e-6 * max(1, abs(expected)), "gate \(g)")
        }
    }

    @Test func rmsNorm_matchesDefinition() {
        let x = Self.random(3, 10, seed: 6), w = Self.random(1, 10, seed: 7), out = Matrix.zeros(rows: 3, cols: 10)
        Kernels.rmsNorm(x, weight: w, epsilon: 1e-5, into: out)
        for r in 0 ..< 3 {
            let ms = (0 ..< 10).map { x[r, $0] * x[r, $0] }.reduce(0, +) / 10
            for i in 0 ..< 10 { #expect(abs(out[r, i] - w[0, i] * x[r, i] / (ms + 1e-5).squareRoot()) < 1e-5) }
        }
    }

    @Test func rope_rotatesPairsByPositionAngle() {
        let config = Fixtures.tinyConfig()
        let weights = Fixtures.tinyWeights(config)
        let x = Self.random(2, config.dim, seed: 8)
        let original = x.toArray()
        Kernels.rope(x, headDim: config.headDim, startPosition: 5, cos: weights.ropeCos, sin: weights.ropeSin)
        for r in 0 ..< 2 {
            let position = Float(5 + r)
            for j in stride(from: 0, to: config.dim, by: 2) {
                let i = (j % config.headDim) / 2
                let angle = position / powf(10000, Float(2 * i) / Float(config.headDim))
                let a = original[r * config.dim + j], b = original[r * config.dim + j + 1]
                #expect(abs(x[r, j] - (a * cos(angle) - b * sin(angle))) < 1e-5)
                #expect(abs(x[r, j + 1] - (a * sin(angle) + b * cos(angle))) < 1e-5)
            }
        }
    }

    @Test func fillUniform_isReproducibleAndInRange() {
        let a = Self.random(4, 9, seed: 11), b = Self.random(4, 9, seed: 11), c = Self.random(4, 9, seed: 12)
        #expect(a.toArray() == b.toArray() && a.toArray() != c.toArray())
        #expect(a.toArray().allSatisfy { $0 >= -1 && $0 < 1 })
    }
}

extension KernelsTests {
    /// Shapes big enough that the projection splits its output columns over the workers,
    /// with band edges that are not multiples of the 16-column alignment.
    @Test(arguments: [(1, 300, 1024), (3, 197, 300), (40, 1000, 64)])
    func matmul_splitOverWorkersMatchesNaiveProduct(m: Int, n: Int, k: Int) {
        let a = Self.random(m, k, seed: 11), b = Self.random(n, k, seed: 12), c = Self.random(m, n, seed: 13)
        let before = c.toArray()
        Kernels.matmul(a, transposed: b, into: c, alpha: 2, beta: -1)
        for i in 0 ..< m {
            for j in 0 ..< n {
                let dot = (0 ..< k).map { Double(a[i, $0]) * Double(b[j, $0]) }.reduce(0, +)
                #expect(abs(Double(c[i, j]) - (2 * dot - Double(before[i * n + j]))) < 1e-3)
            }
        }
    }

    @Test func mask_clearsExactlyTheElementsWhoseBitIsClear() {
        var rng = SeededGenerator(seed: 3)
        for n in [1, 63, 64, 65, 200, 4096] {
            let x = Matrix.zeros(rows: 1, cols: n)
            for i in 0 ..< n { x[0, i] = Float(i) }
            // Words all set, all clear and mixed.
            let words = (0 ..< (n + 63) / 64).map { w -> UInt64 in [~0, 0, rng.next()][w % 3] }
            Kernels.mask(x, allowed: words)
            for i in 0 ..< n {
                let allowed = words[i / 64] & (1 << UInt64(i % 64)) != 0
                #expect(x[0, i] == (allowed ? Float(i) : -.infinity), "n \(n), element \(i)")
            }
        }
    }
}
