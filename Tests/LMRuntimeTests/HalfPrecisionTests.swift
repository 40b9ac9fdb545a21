import CKernels
import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Half-precision weights (`WeightPrecision.f16`): the conversion, both projection paths (the
/// skinny kernel streaming halfs, and blocks converted for sgemm), and the forward pass with an
/// exact cache. (`TransformerTests` also holds f16 to the definition on its own values and to
/// thread-count invariance.)
struct HalfPrecisionTests {
    static let f16Config = Fixtures.tinyConfig(vocabSize: 1000, contextLength: 400, dim: 72, sharedClassifier: false,
                                               weightPrecision: .f16)
    static let f32Config = Fixtures.tinyConfig(vocabSize: 1000, contextLength: 400, dim: 72, sharedClassifier: false)

    /// Both bodies against Swift's own `Float16` for every one of the 65,536 halfs (NaNs stay NaN).
    @Test(arguments: [("dispatched", kv_halfs_to_floats as HalfsToFloats), ("portable", kv_halfs_to_floats_portable as HalfsToFloats)])
    func halfsToFloats_matchesFloat16ForEveryHalf(name: String, body: HalfsToFloats) {
        let bits = (0 ... 0xFFFF).map(UInt16.init)
        var out = [Float](repeating: 0, count: bits.count)
        bits.withUnsafeBufferPointer { src in out.withUnsafeMutableBufferPointer { body($0.baseAddress!, src.baseAddress!, bits.count) } }
        var wrong = 0
        for (b, value) in zip(bits, out) {
            let expected = Float(Float16(bitPattern: b))
            if expected.isNaN ? !value.isNaN : value.bitPattern != expected.bitPattern { wrong += 1 }
            if b & 0x7C00 != 0x7C00, kv_half_to_float(b).bitPattern != expected.bitPattern { wrong += 1 }
        }
        #expect(wrong == 0, "\(name): \(wrong) halfs converted wrongly")
    }

    typealias HalfsToFloats = @Sendable (UnsafeMutablePointer<Float>, UnsafePointer<UInt16>, Int) -> Void
    typealias Skinny = @Sendable (UnsafePointer<Float>, Int, Int, UnsafePointer<Float>, Int, Int, Int, UnsafeMutablePointer<Float>, Int, Float, Float) -> Void
    typealias SkinnyHalf = @Sendable (UnsafePointer<Float>, Int, Int, UnsafePointer<UInt16>, Int, Int, Int, UnsafeMutablePointer<Float>, Int, Float, Float) -> Void

    /// ``kv_skinny_gemm_f16_chunked`` with `chunkRows` rows per chunk, as a ``SkinnyHalf``.
    static func chunked(_ chunkRows: Int) -> SkinnyHalf {
        { x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta in
            var scratch = [Float](repeating: .nan, count: chunkRows * (k + 3))   // rows k + 3 apart: strided
            scratch.withUnsafeMutableBufferPointer {
                kv_skinny_gemm_f16_chunked(x, ldx, rows, w, ldw, outputs, k, y, ldy, alpha, beta, $0.baseAddress!, k + 3, chunkRows, 0, nil, 0)
            }
        }
    }

    /// The half kernel is the float kernel on the converted weights, bit for bit, when both run the
    /// same body (converting a half is exact, and the arithmetic after it is the same), at shapes
    /// that hit every tile and tail, including subnormal and extreme halfs.
    /// The chunked entry point (halfs converted a few rows at a time, the next chunk prefetched) is
    /// the dispatched float kernel on the converted weights, for chunks of whole and partial tiles.
    @Test(arguments: [("dispatched", kv_skinny_gemm_f16 as SkinnyHalf, kv_skinny_gemm as Skinny),
                      ("portable", kv_skinny_gemm_f16_portable as SkinnyHalf, kv_skinny_gemm_portable as Skinny),
                      ("chunks of 4", chunked(4), kv_skinny_gemm as Skinny), ("chunks of 6", chunked(6), kv_skinny_gemm as Skinny)])
    func skinnyGEMMHalf_isTheFloatKernelOnTheConvertedWeights(name: String, half: SkinnyHalf, float: Skinny) {
        let sameBody = name != "dispatched" || Kernels.usesAVX2 == Kernels.usesF16C
        for (rows, outputs, k) in [(1, 9, 77), (2, 4, 8), (3, 7, 64), (4, 11, 100), (5, 13, 9), (6, 10, 24), (8, 16, 200), (1, 5, 1), (7, 3, 2816), (32, 20, 72)] {
            let x = CKernelsTests.values(rows * k, seed: UInt64(rows + k), scale: 1)
            var w = CKernelsTests.values(outputs * k, seed: UInt64(outputs * 3 + k), scale: 2).map(Kernels.halfBits)
            if w.count > 4 { w[0] = 0x0001; w[1] = 0x83FF; w[2] = 0x7BFF; w[3] = 0x8000 }   // subnormals, max, -0
            let converted = w.map(Kernels.float(fromHalf:))
            let start = CKernelsTests.values(rows * outputs, seed: 5, scale: 1)
            for (alpha, beta) in [(Float(1), Float(0)), (0.5, 1)] {
                var a = start, b = start
                x.withUnsafeBufferPointer { xp in
                    w.withUnsafeBufferPointer { wp in a.withUnsafeMutableBufferPointer {
                        half(xp.baseAddress!, k, rows, wp.baseAddress!, k, outputs, k, $0.baseAddress!, outputs, alpha, beta)
                    } }
                    converted.withUnsafeBufferPointer { wp in b.withUnsafeMutableBufferPointer {
                        float(xp.baseAddress!, k, rows, wp.baseAddress!, k, outputs, k, $0.baseAddress!, outputs, alpha, beta)
                    } }
                }
                if sameBody {
                    #expect(zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern }, "\(name) \(rows)x\(outputs)x\(k)")
                } else {
                    #expect(Fixtures.maxRelativeError(a, b) <= 1e-5, "\(name) \(rows)x\(outputs)x\(k)")
                }
            }
        }
    }

    /// `Kernels.matmul` over half weights, on both paths (skinny for few rows; blocks converted into
    /// scratch and sgemm for many), against the float32 product on the same values. Without scratch
    /// the skinny kernel takes any number of rows.
    @Test(arguments: [1, 5, 8, 17, 33, 130])
    func matmul_halfWeightsMatchTheFloatProductOfTheirValues(rows: Int) {
        let outputs = 300, k = 72   // more output rows than one conversion block, bands not multiples of 16
        let a = Matrix(rows: rows, cols: k, values: CKernelsTests.values(rows * k, seed: 11, scale: 1))
        let f32 = Matrix(rows: outputs, cols: k, values: CKernelsTests.values(outputs * k, seed: 12, scale: 1)
            .map { Kernels.float(fromHalf: Kernels.halfBits($0)) })   // values a half holds exactly
        let half = WeightMatrix.half(copying: f32)
        let expected = Matrix.zeros(rows: rows, cols: outputs)
        Kernels.matmul(a, transposed: f32, into: expected)
        for scratch in [HalfScratch(width: k), nil] {
            let c = Matrix.zeros(rows: rows, cols: outputs)
            Kernels.matmul(a, transposed: half, into: c, scratch: scratch)
            #expect(Fixtures.maxRelativeError(c.toArray(), expected.toArray()) <= 1e-5, "rows \(rows), scratch \(scratch != nil)")
        }
    }

    /// Blocks for sgemm over a matrix narrower than the scratch is wide hold proportionally more rows
    /// (here three times as many: several blocks a band, the last one partial, whole packed groups):
    /// the product still matches the float32 one, on plain and packed half weights.
    @Test(arguments: [false, true])
    func matmul_narrowMatricesTakeTallerBlocks(packed: Bool) {
        let rows = Kernels.skinnyRowLimit + 9, outputs = 2_000, k = 72
        let a = Matrix(rows: rows, cols: k, values: CKernelsTests.values(rows * k, seed: 21, scale: 1))
        let f32 = Matrix(rows: outputs, cols: k, values: CKernelsTests.values(outputs * k, seed: 22, scale: 1)
            .map { Kernels.float(fromHalf: Kernels.halfBits($0)) })
        let half = packed ? Kernels.pack(WeightMatrix.half(copying: f32)) : WeightMatrix.half(copying: f32)
        let expected = Matrix.zeros(rows: rows, cols: outputs), c = Matrix.zeros(rows: rows, cols: outputs)
        Kernels.matmul(a, transposed: f32, into: expected)
        Kernels.matmul(a, transposed: half, into: c, scratch: HalfScratch(width: 3 * k))
        #expect(half.packed == packed)
        #expect(Fixtures.maxRelativeError(c.toArray(), expected.toArray()) <= 1e-5)
    }

    /// Converting rounds each weight once to the nearest half; converting back is exact, and again
    /// to half changes nothing. Norm gains stay float32 and unchanged.
    @Test func converted_roundsEachWeightOnceAndBackExactly() throws {
        let f32 = Fixtures.tinyWeights(Self.f32Config)
        let f16 = try f32.converted(to: .f16)
        #expect(f16.precision == .f16 && f16.config.weightPrecision == .f16 && f16.layers[1].down.precision == .f16)
        #expect(f16.layers[1].down.toArray() == f32.layers[1].down.toArray().map { Kernels.float(fromHalf: Kernels.halfBits($0)) })
        #expect(f16.classifier.toArray() == f32.classifier.toArray().map { Kernels.float(fromHalf: Kernels.halfBits($0)) })
        #expect(f16.layers[0].attentionNorm.toArray() == f32.layers[0].attentionNorm.toArray())
        let back = try f16.converted(to: .f32)
        #expect(back.precision == .f32 && back.layers[0].gateUp.toArray() == f16.layers[0].gateUp.toArray())
        #expect(try back.converted(to: .f16).layers[0].qkv.toArray() == f16.layers[0].qkv.toArray())
        #expect(try f16.converted(to: .f16) === f16)
        #expect(f16.byteCount < f32.byteCount * 52 / 100, "\(f16.byteCount) of \(f32.byteCount) bytes")
        // A synthetic f16 model is the f32 one rounded once.
        #expect(Fixtures.tinyWeights(Self.f16Config).layers[1].wo.toArray() == f16.layers[1].wo.toArray())
    }

    /// Chunked prefills across the skinny limit (1, 5, 40 and 70 rows) give the one-shot logits
    /// and leave a cache equal to a fresh prefill's.
    @Test func forward_chunkedPrefillMatchesOneShot() throws {
        let model = Transformer(weights: Fixtures.tinyWeights(Self.f16Config))
        let tokens = Fixtures.tokens(count: 160, vocabSize: model.config.vocabSize, seed: 4)
        let expected = try model.forward(tokens, cache: model.makeCache()).toArray()
        for sizes in [[1, 5, 40, 70], [70, 1, 1, 40], [33, 32, 31]] {
            let cache = model.makeCache()
            var logits: [Float] = []
            for chunk in TransformerTests.chunks(tokens, sizes: sizes) { logits = try model.forward(chunk, cache: cache).toArray() }
            #expect(Fixtures.maxRelativeError(logits, expected) <= 1e-4, "chunks \(sizes)")
            #expect(try cache.deviationFromFreshPrefill(model).maxRelativeError <= 1e-4)
        }
    }

    /// Rounding the weights moves the logits a little, not the model: on the same tokens the f16
    /// logits stay within 2% of the f32 ones (relative to max(1, |logit|)) and pick the same token.
    @Test func forward_staysCloseToFloat32() throws {
        let f32 = Transformer(weights: Fixtures.tinyWeights(Self.f32Config))
        let f16 = Transformer(weights: Fixtures.tinyWeights(Self.f16Config))
        let tokens = Fixtures.tokens(count: 50, vocabSize: f32.config.vocabSize, seed: 9)
        let a = try f32.forward(tokens, cache: f32.makeCache()).toArray()
        let b = try f16.forward(tokens, cache: f16.makeCache()).toArray()
        let deviation = Fixtures.maxRelativeError(b, a)
        #expect(deviation > 0 && deviation <= 0.02, "f16 deviates \(deviation) from f32")
        #expect(a.indices.max { a[$0] < a[$1] } == b.indices.max { b[$0] < b[$1] })
    }

    /// The precision is part of the config: decoded when present, written only when not f32 (so
    /// float32 configs and their fingerprints read as before), and it sets the weight bytes.
    @Test func config_precisionRoundTripsAndChangesFingerprintAndCost() throws {
        let json = #"{"name":"h","dim":32,"hiddenDim":96,"layerCount":2,"headCount":4,"kvHeadCount":2,"vocabSize":300,"contextLength":96,"weights":{"synthetic":{"seed":7}},"weightPrecision":"f16"}"#
        let decoded = try JSONDecoder().decode(ModelConfig.self, from: Data(json.utf8))
        #expect(decoded.weightPrecision == .f16)
        #expect(String(decoding: try JSONEncoder().encode(decoded), as: UTF8.self).contains("\"weightPrecision\":\"f16\""))
        #expect(!String(decoding: try JSONEncoder().encode(Self.f32Config), as: UTF8.self).contains("weightPrecision"))
        let bad = json.replacingOccurrences(of: "\"f16\"", with: "\"f8\"")
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(ModelConfig.self, from: Data(bad.utf8)) }
        let f32 = Fixtures.tinyWeights(Self.f32Config), f16 = try f32.converted(to: .f16)
        #expect(ModelFingerprint(f32) != ModelFingerprint(f16))
        #expect(ModelFingerprint(f16) == ModelFingerprint(try f32.converted(to: .f16)))
        let cost32 = Self.f32Config.resourceEstimate().weightBytes, cost16 = Self.f16Config.resourceEstimate().weightBytes
        #expect(cost16 < cost32 * 55 / 100 && cost16 > cost32 * 45 / 100, "\(cost16) vs \(cost32)")
        #expect(abs(cost16 - f16.byteCount) < 400 * 4 * 36 + 1, "estimate \(cost16) vs allocated \(f16.byteCount) + RoPE tables")
    }

    /// Where a poisoned weight goes: a tensor's llama.cpp name and the view of it in the weights.
    static let overflowSites: [(tensor: String, matrix: @Sendable (ModelWeights) -> WeightMatrix)] = [
        ("token_embd.weight", { $0.tokenEmbedding }),
        ("blk.0.attn_k.weight", { $0.layers[0].wk }),
        ("blk.1.attn_output.weight", { $0.layers[1].wo }),
        ("blk.1.ffn_up.weight", { $0.layers[1].gateUp.rows($0.config.hiddenDim ..< 2 * $0.config.hiddenDim) }),
        ("blk.1.ffn_down.weight", { $0.layers[1].down }),
        ("output.weight", { $0.classifier }),
    ]

    /// Sets element (`row`, `col`) of a float32 weight matrix, packed or plain.
    static func poison(_ matrix: WeightMatrix, row: Int, col: Int, _ value: Float) {
        guard case let .f32(m) = matrix.storage else { preconditionFailure("float32 weights only") }
        m.base[matrix.packed ? kv_packed_index(row, col, matrix.cols) : row * m.rowStride + col] = value
        #expect(matrix[row, col] == value || (value.isNaN && matrix[row, col].isNaN))
    }

    /// Converting to halfs refuses weights that would round to infinity, before allocating, with
    /// the tensor's name, how many and the largest; the float32 weights are left as they were and
    /// still run. (``checkHalfRange()`` gives the same answer.)
    @Test(arguments: 0 ..< 6)
    func converted_refusesWeightsBeyondTheHalfRange(site: Int) throws {
        let (tensor, view) = Self.overflowSites[site]
        let weights = Fixtures.tinyWeights(Self.f32Config)
        let matrix = view(weights)
        Self.poison(matrix, row: 1, col: 2, 1e6)
        Self.poison(matrix, row: matrix.rows - 1, col: 0, -70000)
        let expected = ModelLoadError.beyondHalfRange(tensor: tensor, count: 2, largest: 1e6)
        #expect(throws: expected) { try weights.converted(to: .f16) }
        #expect(throws: expected) { try weights.checkHalfRange() }
        #expect(expected.description.contains(tensor) && expected.description.contains("2 weights"), "\(expected)")
        #expect(matrix[1, 2] == 1e6 && matrix[matrix.rows - 1, 0] == -70000)
        let transformer = Transformer(weights: weights)
        #expect(try transformer.forward([1, 2, 3], cache: transformer.makeCache()).cols == Self.f32Config.vocabSize)
    }

    /// The range's edge: 65,504 and the largest float below 65,520 convert (to 65,504), an infinity
    /// already in the weights converts to itself; 65,520 (a tie that rounds to infinity) and its
    /// negative are refused.
    @Test func converted_acceptsTheLargestHalfAndRefusesTheFirstFloatBeyond() throws {
        let below = Fixtures.tinyWeights(Self.f32Config)
        Self.poison(below.layers[0].down, row: 0, col: 0, 65504)
        Self.poison(below.layers[0].down, row: 0, col: 1, Float(65520).nextDown)
        Self.poison(below.layers[0].down, row: 0, col: 2, -.infinity)
        let f16 = try below.converted(to: .f16)
        #expect([f16.layers[0].down[0, 0], f16.layers[0].down[0, 1], f16.layers[0].down[0, 2]] == [65504, 65504, -.infinity])
        for edge: Float in [65520, -65520] {
            let beyond = Fixtures.tinyWeights(Self.f32Config)
            Self.poison(beyond.layers[0].down, row: 0, col: 1, edge)
            #expect(Kernels.float(fromHalf: Kernels.halfBits(edge)).isInfinite)
            #expect(throws: ModelLoadError.beyondHalfRange(tensor: "blk.0.ffn_down.weight", count: 1, largest: 65520)) {
                try beyond.converted(to: .f16)
            }
        }
        try Fixtures.tinyWeights(Self.f16Config).checkHalfRange()
    }
}
