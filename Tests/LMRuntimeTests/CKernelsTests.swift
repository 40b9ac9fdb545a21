import CKernels
import Foundation
import LMRuntime
import Testing

/// The C elementwise kernels: the entry points (AVX2+FMA bodies where the CPU has them)
/// and the portable bodies, each against the double-precision definition, at lengths
/// that exercise the 8-lane loops and their scalar tails.
struct CKernelsTests {
    static let lengths = [1, 7, 8, 9, 64, 77, 2816]

    static func values(_ n: Int, seed: UInt64, scale: Float) -> [Float] {
        let m = Matrix.zeros(rows: 1, cols: n)
        Kernels.fillUniform(m, seed: seed, scale: scale)
        return m.toArray()
    }

    typealias ExpSum = @Sendable (UnsafeMutablePointer<Float>, Int) -> Float

    @Test(arguments: [("dispatched", kv_exp_shifted_sum as ExpSum), ("portable", kv_exp_shifted_sum_portable as ExpSum)])
    func expShiftedSum_matchesDefinition(name: String, body: ExpSum) {
        for n in Self.lengths {
            // Wide range: differences to the max reach -200, beyond the clamp at -87.3.
            var x = Self.values(n, seed: UInt64(n), scale: 100)
            let original = x
            let maxValue = original.max()!
            let sum = x.withUnsafeMutableBufferPointer { body($0.baseAddress!, n) }
            let exact = original.map { exp(Double($0 - maxValue)) }
            for i in 0 ..< n {
                #expect(abs(Double(x[i]) - exact[i]) <= 1e-6 * max(exact[i], 1e-30) + 1e-37, "\(name) n=\(n) i=\(i)")
            }
            #expect(abs(Double(sum) - exact.reduce(0, +)) <= 1e-5 * exact.reduce(0, +), "\(name) n=\(n)")
        }
    }

    typealias Sum = @Sendable (UnsafePointer<Float>, Int) -> Float

    @Test(arguments: [("dispatched sum", kv_sum as Sum), ("portable sum", kv_sum_portable as Sum),
                      ("dispatched max", kv_max as Sum), ("portable max", kv_max_portable as Sum)])
    func sumAndMax_matchDefinition(name: String, body: Sum) {
        for n in Self.lengths + [31, 32, 33, 100] {
            let x = Self.values(n, seed: UInt64(n) + 500, scale: 10)
            let got = x.withUnsafeBufferPointer { body($0.baseAddress!, n) }
            if name.hasSuffix("max") {
                #expect(got == x.max()!, "\(name) n=\(n)")
            } else {
                let exact = x.map(Double.init).reduce(0, +), magnitude = x.map { Double(abs($0)) }.reduce(0, +)
                #expect(abs(Double(got) - exact) <= 1e-6 * magnitude, "\(name) n=\(n)")
            }
        }
    }

    typealias ExpSub = @Sendable (UnsafeMutablePointer<Float>, Int, Float) -> Float

    /// The tiled softmax's building block: with the row's own maximum it is kv_exp_shifted_sum, bit for bit.
    @Test(arguments: [("dispatched", kv_exp_sub_sum as ExpSub, kv_exp_shifted_sum as ExpSum),
                      ("portable", kv_exp_sub_sum_portable as ExpSub, kv_exp_shifted_sum_portable as ExpSum)])
    func expSubSum_withTheMaximumEqualsExpShiftedSum(name: String, body: ExpSub, reference: ExpSum) {
        for n in Self.lengths {
            var a = Self.values(n, seed: UInt64(n) + 600, scale: 20), b = a
            let shift = a.max()!
            let s1 = a.withUnsafeMutableBufferPointer { body($0.baseAddress!, n, shift) }
            let s2 = b.withUnsafeMutableBufferPointer { reference($0.baseAddress!, n) }
            #expect(s1.bitPattern == s2.bitPattern && a.map(\.bitPattern) == b.map(\.bitPattern), "\(name) n=\(n)")
        }
    }

    /// Two rows' softmax step at once: each row's exponentials and sum are its own kv_exp_sub_sum
    /// call's bits, for lengths equal and unequal around the steps of 32 and the eight-wide and
    /// scalar tails (one row running on alone), and with inputs past the clamps.
    @Test func expSubSumPair_givesEachRowTheBitsOfItsOwnCall() {
        for (n0, n1) in [(128, 128), (1, 1), (7, 40), (40, 7), (33, 100), (128, 60), (300, 31), (64, 64), (9, 8)] {
            var a = Self.values(n0, seed: UInt64(n0) + 700, scale: 30), b = Self.values(n1, seed: UInt64(n1) + 800, scale: 30)
            if n0 > 3 { a[1] = 500; a[2] = -500 }
            let shift0 = a.max()! - 1, shift1 = b.max()! + 3
            var expectedA = a, expectedB = b
            let sum0 = kv_exp_sub_sum(&expectedA, n0, shift0), sum1 = kv_exp_sub_sum(&expectedB, n1, shift1)
            var sums: [Float] = [0, 0]
            a.withUnsafeMutableBufferPointer { x0 in
                b.withUnsafeMutableBufferPointer { x1 in
                    kv_exp_sub_sum_pair(x0.baseAddress!, n0, shift0, x1.baseAddress!, n1, shift1, &sums)
                }
            }
            #expect(a.map(\.bitPattern) == expectedA.map(\.bitPattern) && b.map(\.bitPattern) == expectedB.map(\.bitPattern),
                    "n \(n0), \(n1)")
            #expect(sums[0].bitPattern == sum0.bitPattern && sums[1].bitPattern == sum1.bitPattern, "n \(n0), \(n1)")
        }
    }

    typealias Skinny = @Sendable (UnsafePointer<Float>, Int, Int, UnsafePointer<Float>, Int, Int, Int,
                                  UnsafeMutablePointer<Float>, Int, Float, Float) -> Void

    /// Few-row projections: against the double-precision product at shapes that hit every tile and
    /// tail (rows and outputs not multiples of the tile, k not a multiple of 8), with alpha and beta;
    /// and each element the same bits when computed in a smaller call (tiles and bands change nothing).
    @Test(arguments: [("dispatched", kv_skinny_gemm as Skinny), ("portable", kv_skinny_gemm_portable as Skinny)])
    func skinnyGEMM_matchesDefinitionAndIsTileInvariant(name: String, body: Skinny) {
        for (rows, outputs, k) in [(1, 9, 77), (2, 4, 8), (3, 7, 64), (5, 13, 9), (8, 16, 200), (1, 5, 1), (7, 3, 2816), (4, 11, 100), (4, 6, 64)] {
            let x = Self.values(rows * (k + 3), seed: UInt64(rows * 31 + k), scale: 1)
            let w = Self.values(outputs * (k + 1), seed: UInt64(outputs * 17 + k), scale: 1)
            let start = Self.values(rows * outputs, seed: 99, scale: 1)
            for (alpha, beta) in [(Float(1), Float(0)), (0.5, 1)] {
                var y = start
                x.withUnsafeBufferPointer { xp in w.withUnsafeBufferPointer { wp in y.withUnsafeMutableBufferPointer { yp in
                    body(xp.baseAddress!, k + 3, rows, wp.baseAddress!, k + 1, outputs, k, yp.baseAddress!, outputs, alpha, beta)
                } } }
                for t in 0 ..< rows {
                    for n in 0 ..< outputs {
                        let dot = (0 ..< k).map { Double(x[t * (k + 3) + $0]) * Double(w[n * (k + 1) + $0]) }.reduce(0, +)
                        let magnitude = (0 ..< k).map { abs(Double(x[t * (k + 3) + $0]) * Double(w[n * (k + 1) + $0])) }.reduce(0, +)
                        let expected = Double(alpha) * dot + Double(beta) * Double(start[t * outputs + n])
                        #expect(abs(Double(y[t * outputs + n]) - expected) <= 1e-6 * (magnitude + 1), "\(name) \(rows)x\(outputs)x\(k) [\(t), \(n)]")
                    }
                }
                // One element at a time: the same bits as in the whole call.
                for t in [0, rows - 1] {
                    for n in [0, outputs / 2, outputs - 1] {
                        var one = [start[t * outputs + n]]
                        x.withUnsafeBufferPointer { xp in w.withUnsafeBufferPointer { wp in one.withUnsafeMutableBufferPointer { yp in
                            body(xp.baseAddress! + t * (k + 3), k + 3, 1, wp.baseAddress! + n * (k + 1), k + 1, 1, k, yp.baseAddress!, 1, alpha, beta)
                        } } }
                        #expect(one[0].bitPattern == y[t * outputs + n].bitPattern, "\(name) \(rows)x\(outputs)x\(k) [\(t), \(n)] alone")
                    }
                }
            }
        }
    }

    typealias SwiGLU = @Sendable (UnsafeMutablePointer<Float>, UnsafePointer<Float>, Int) -> Void

    @Test(arguments: [("dispatched", kv_swiglu as SwiGLU), ("portable", kv_swiglu_portable as SwiGLU)])
    func swiGLU_matchesDefinition(name: String, body: SwiGLU) {
        for n in Self.lengths {
            var gate = Self.values(n, seed: UInt64(n) + 100, scale: 30)
            if n > 4 { gate[0] = -100; gate[1] = 95; gate[2] = 0; gate[3] = -1e-4 }
            let up = Self.values(n, seed: UInt64(n) + 200, scale: 2)
            let original = gate
            gate.withUnsafeMutableBufferPointer { g in up.withUnsafeBufferPointer { body(g.baseAddress!, $0.baseAddress!, n) } }
            for i in 0 ..< n {
                let g = Double(original[i]), expected = g / (1 + exp(-g)) * Double(up[i])
                #expect(abs(Double(gate[i]) - expected) <= 1e-6 * max(1, abs(expected)), "\(name) n=\(n) gate=\(g)")
            }
        }
    }

    typealias RMSNorm = @Sendable (UnsafeMutablePointer<Float>, UnsafePointer<Float>, UnsafePointer<Float>, Int, Float) -> Void

    @Test(arguments: [("dispatched", kv_rmsnorm as RMSNorm), ("portable", kv_rmsnorm_portable as RMSNorm)])
    func rmsNorm_matchesDefinition(name: String, body: RMSNorm) {
        for n in Self.lengths {
            let x = Self.values(n, seed: UInt64(n) + 300, scale: 3), w = Self.values(n, seed: UInt64(n) + 400, scale: 1)
            var out = [Float](repeating: .nan, count: n)
            out.withUnsafeMutableBufferPointer { o in
                x.withUnsafeBufferPointer { xp in w.withUnsafeBufferPointer { body(o.baseAddress!, xp.baseAddress!, $0.baseAddress!, n, 1e-5) } }
            }
            let meanSquare = x.map { Double($0) * Double($0) }.reduce(0, +) / Double(n)
            for i in 0 ..< n {
                let expected = Double(w[i]) * Double(x[i]) / (meanSquare + 1e-5).squareRoot()
                #expect(abs(Double(out[i]) - expected) <= 1e-5 * max(1, abs(expected)), "\(name) n=\(n) i=\(i)")
            }
        }
    }

    @Test func usesAVX2_matchesTheCPU() throws {
        #if arch(x86_64)
        let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        try #require(!flags.isEmpty, "no /proc/cpuinfo to compare with")
        let words = Set(flags.split(whereSeparator: \.isWhitespace))
        #expect(Kernels.usesAVX2 == (words.contains("avx2") && words.contains("fma")))
        #else
        #expect(!Kernels.usesAVX2)
        #endif
    }

    /// The first CPU's fields in /proc/cpuinfo, by name prefix ("" where absent).
    static func cpuinfoField() throws -> (String) -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        try #require(!cpuinfo.isEmpty, "no /proc/cpuinfo to compare with")
        let lines = cpuinfo.split(separator: "\n")
        return { name in
            let line = lines.first { $0.hasPrefix(name) } ?? ""
            return line.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        }
    }

    /// kv_amd_zen_generation agrees with /proc/cpuinfo's vendor, family, model and flags: family 23
    /// is Zen 1 below model 48 and Zen 2 from it, family 25 Zen 3 without AVX-512 and Zen 4 with it,
    /// family 26 Zen 5; other CPUs 0.
    @Test func amdZenGeneration_matchesTheCPU() throws {
        #if arch(x86_64)
        let field = try Self.cpuinfoField()
        let family = Int(field("cpu family")) ?? -1, model = Int(field("model\t")) ?? -1
        let avx512 = field("flags").split(separator: " ").contains("avx512f")
        let expected = field("vendor_id") != "AuthenticAMD" ? 0
            : family == 23 ? (model < 48 ? 1 : 2) : family == 25 ? (avx512 ? 4 : 3) : family == 26 ? 5 : 0
        #expect(Kernels.amdZenGeneration == expected, "family \(family) model \(model)")
        #else
        #expect(Kernels.amdZenGeneration == 0)
        #endif
    }

    /// kv_intel_emerald_rapids agrees with /proc/cpuinfo (GenuineIntel, family 6, model 207), and the
    /// prefetch level's default follows the two CPUs it was measured on, and there half weights
    /// convert in registers at every skinny row count.
    @Test func intelEmeraldRapids_matchesTheCPUAndSetsThePrefetchDefault() throws {
        #if arch(x86_64)
        let field = try Self.cpuinfoField()
        let emerald = field("vendor_id") == "GenuineIntel" && field("cpu family") == "6" && field("model\t") == "207"
        #expect((kv_intel_emerald_rapids() != 0) == emerald)
        #expect((kv_prefetch_l2_by_default() != 0) == (emerald || Kernels.amdZenGeneration == 4))
        if emerald && kv_uses_skinny_avx512() != 0 && ProcessInfo.processInfo.environment["KVSESSION_HALF_CONVERT_ROWS"] == nil {
            #expect(Kernels.halfConversionRows > Kernels.skinnyRowLimit, "half weights convert in registers throughout")
        }
        #else
        #expect(kv_intel_emerald_rapids() == 0)
        #endif
    }

    /// The prefix store's file checksum: every single-bit flip, every truncation and every
    /// appended byte of buffers around the 32-byte stripe and 8-byte word edges changes it.
    @Test(arguments: [0, 1, 7, 8, 31, 32, 33, 64, 100])
    func checksum_changesWithEveryBitAndLength(length: Int) {
        var rng = SeededGenerator(seed: UInt64(length))
        let bytes = (0 ..< length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let data = Data(bytes)
        let reference = Kernels.checksum(data, 0 ..< length)
        #expect(Kernels.checksum(Data(bytes), 0 ..< length) == reference)
        for i in 0 ..< length {
            for bit in 0 ..< 8 {
                var flipped = bytes
                flipped[i] ^= 1 << bit
                #expect(Kernels.checksum(Data(flipped), 0 ..< length) != reference, "byte \(i) bit \(bit)")
            }
        }
        for cut in 0 ..< length { #expect(Kernels.checksum(data, 0 ..< cut) != reference, "cut at \(cut)") }
        #expect(Kernels.checksum(data + [0], 0 ..< length + 1) != reference)
    }

    /// Computed in pieces of any sizes, the checksum is the one of the whole (the disk tier
    /// checksums rows as they are read); and it is the value files were written with (pinned from
    /// the one-shot implementation every earlier file used).
    @Test(arguments: [1, 3, 31, 32, 33, 100, 1_000])
    func checksum_inPiecesEqualsTheWhole(maximumPiece: Int) {
        let bytes = (0 ..< 1_000).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
        #expect(kv_checksum64(bytes, 1_000) == 0x511D_A956_2033_9B05)
        #expect(kv_checksum64(bytes, 45) == 0xD595_2A1B_2393_8CDB && kv_checksum64(bytes, 0) == 0x9090_306C_6E91_ED59)
        var rng = SeededGenerator(seed: UInt64(maximumPiece))
        for length in [0, 1, 45, 1_000] {
            var state = kv_checksum_state()
            kv_checksum64_begin(&state)
            var done = 0
            while done < length {
                let piece = min(length - done, Int(rng.next() % UInt64(maximumPiece)) + 1)
                bytes.withUnsafeBytes { kv_checksum64_update(&state, $0.baseAddress! + done, piece) }
                done += piece
            }
            #expect(kv_checksum64_end(&state) == kv_checksum64(bytes, length), "\(length) bytes")
        }
    }
}
