import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// LoRA adapters: the file format, the merge against its definition, and the fingerprint rule
/// that keeps an adapted model's K/V apart from its base's.
struct LowRankAdapterTests {
    static let base = Fixtures.tinyWeights()

    /// The float32 rows of one projection of `weights`, read through packing.
    static func rows(_ weights: ModelWeights, _ target: LowRankAdapter.Target) -> [[Float]] {
        let layer = weights.layers[target.layer], h = weights.config.hiddenDim
        let m: WeightMatrix = switch target.projection {
        case .query: layer.wq
        case .key: layer.wk
        case .value: layer.wv
        case .output: layer.wo
        case .gate: layer.gateUp.rows(0 ..< h)
        case .up: layer.gateUp.rows(h ..< 2 * h)
        case .down: layer.down
        }
        return (0 ..< m.rows).map { r in (0 ..< m.cols).map { m[r, $0] } }
    }

    static func values(_ m: Matrix) -> [Float] { m.toArray() }

    /// A hand-written adapter file for `tinyWeights` (independent of the package's writer).
    static func handFile(fingerprint: String = ModelFingerprint(base).description,
                         edit: (inout HandGGUF) -> Void = { _ in }) -> Data {
        var g = HandGGUF()
        g.string("general.architecture", "llama")
        g.string("general.type", "adapter")
        g.string("adapter.type", "lora")
        g.f32("adapter.lora.alpha", 4)
        g.string("kvsession.adapter.base_fingerprint", fingerprint)
        g.string("kvsession.adapter.creator_defined_metadata", #"{"task":"tagging","version":3}"#)
        let dim = base.config.dim
        g.f32Tensor("blk.1.attn_v.weight.lora_a", [dim, 2], (0 ..< 2 * dim).map { Float($0 % 7) * 0.01 - 0.03 })
        g.f32Tensor("blk.1.attn_v.weight.lora_b", [2, base.config.kvDim], (0 ..< 2 * base.config.kvDim).map { Float($0 % 5) * 0.02 - 0.04 })
        edit(&g)
        return g.data()
    }

    @Test func init_readsAHandWrittenFile() throws {
        let data = Self.handFile()
        let adapter = try LowRankAdapter(ggufData: data)
        #expect(adapter.rank == 2 && adapter.alpha == 4 && adapter.scale == 2)
        #expect(adapter.baseFingerprint == ModelFingerprint(Self.base))
        #expect(adapter.creatorDefinedMetadata == #"{"task":"tagging","version":3}"#)
        #expect(Set(adapter.factors.keys) == [.init(layer: 1, projection: .value)])
        let factors = try #require(adapter.factors[.init(layer: 1, projection: .value)])
        #expect(factors.a.rows == 2 && factors.a.cols == Self.base.config.dim)
        #expect(factors.b.rows == Self.base.config.kvDim && factors.b.cols == 2)
        #expect(factors.a[1, 0] == Float(Self.base.config.dim % 7) * 0.01 - 0.03)
        let again = try LowRankAdapter(ggufData: data), edited = try LowRankAdapter(ggufData: Self.handFile { $0.f32("extra", 1) })
        #expect(adapter.identity.count == 64 && adapter.identity == again.identity)
        #expect(adapter.identity != edited.identity)
    }

    /// An adapter's export is range-checked like a model's: a factor of whole 32-weight rows as
    /// Q8_0 blocks, a narrower one (rows of `rank`) as halfs, each refused with its tensor's name.
    @Test func checkRange_refusesFactorsTheEncodingCannotHold() throws {
        let adapter = LowRankAdapter.random(for: Self.base, rank: 3, alpha: 6, projections: [.query], layers: 1 ..< 2, seed: 11)
        let factors = try #require(adapter.factors[.init(layer: 1, projection: .query)])
        try adapter.checkRange(for: .q8_0)
        factors.a[1, 5] = 1e7
        factors.b[2, 1] = 7e4
        #expect(throws: ModelLoadError.beyondQ8_0Range(tensor: "blk.1.attn_q.weight.lora_a", blocks: 1, largest: 1e7)) {
            try adapter.checkRange(for: .q8_0)
        }
        factors.a[1, 5] = 9e4   // fits a Q8_0 block, not a half
        #expect(throws: ModelLoadError.beyondHalfRange(tensor: "blk.1.attn_q.weight.lora_b", count: 1, largest: 7e4)) {
            try adapter.checkRange(for: .q8_0)
        }
        #expect(throws: ModelLoadError.beyondHalfRange(tensor: "blk.1.attn_q.weight.lora_a", count: 1, largest: 9e4)) {
            try adapter.checkRange(for: .f16)
        }
        try adapter.checkRange(for: .f32)
    }

    @Test(arguments: [GGUFTensorType.f32, .f16])
    func ggufData_roundTripsFactorsAndMetadata(type: GGUFTensorType) throws {
        let adapter = LowRankAdapter.random(for: Self.base, rank: 3, alpha: 6, projections: [.query, .down], layers: 1 ..< 2,
                                            seed: 11, name: "demo", creatorDefinedMetadata: #"{"a":1}"#)
        let data = try adapter.ggufData(tensorType: type)
        let read = try LowRankAdapter(ggufData: data)
        #expect(read.name == "demo" && read.rank == 3 && read.alpha == 6 && read.creatorDefinedMetadata == #"{"a":1}"#)
        #expect(read.baseFingerprint == ModelFingerprint(Self.base))
        #expect(Set(read.factors.keys) == [.init(layer: 1, projection: .query), .init(layer: 1, projection: .down)])
        for (target, factors) in adapter.factors {
            let back = try #require(read.factors[target])
            for (x, y) in [(factors.a, back.a), (factors.b, back.b)] {
                // float32 exactly; halfs within their rounding (relative 2^-11)
                let expected = type == .f32 ? Self.values(x) : Self.values(x).map { Float(Float16($0)) }
                #expect(Self.values(y) == expected)
            }
        }
        // random(...) names an adapter by the bytes it saves as.
        let saved = try LowRankAdapter(ggufData: adapter.ggufData())
        #expect(adapter.identity == saved.identity)
    }

    @Test func merging_addsTheScaledProductToTheAdaptedProjectionsOnly() throws {
        let adapter = LowRankAdapter.random(for: Self.base, rank: 4, alpha: 2, projections: [.key, .gate, .down], layers: 0 ..< 1, seed: 3)
        let merged = try Self.base.merging(adapter)
        #expect(merged.config.adapter == adapter.identity)
        for layer in 0 ..< Self.base.config.layerCount {
            for projection in LowRankAdapter.Projection.allCases {
                let target = LowRankAdapter.Target(layer: layer, projection: projection)
                let before = Self.rows(Self.base, target), after = Self.rows(merged, target)
                guard let f = adapter.factors[target] else {
                    #expect(after == before, "\(target) changed without factors")
                    continue
                }
                for i in before.indices {
                    for j in before[i].indices {
                        // The kernel's order: sum over the rank in double, one scaled add, one rounding.
                        var sum = 0.0
                        for k in 0 ..< adapter.rank { sum += Double(f.b[i, k]) * Double(f.a[k, j]) }
                        let exact = Float(Double(before[i][j]) + Double(adapter.scale) * sum)
                        #expect(after[i][j].bitPattern == exact.bitPattern, "\(target) [\(i), \(j)]")
                        // ... and the definition, in double.
                        let definition = Double(before[i][j]) + Double(adapter.scale)
                            * (0 ..< adapter.rank).reduce(0.0) { $0 + Double(f.b[i, $1]) * Double(f.a[$1, j]) }
                        #expect(abs(Double(after[i][j]) - definition) <= 1e-5 * max(1, abs(definition)))
                    }
                }
            }
        }
        #expect(merged.finalNorm.toArray() == Self.base.finalNorm.toArray())
        #expect(merged.tokenEmbedding.floatMatrix().toArray() == Self.base.tokenEmbedding.floatMatrix().toArray())
        #expect(merged.hasPackedWeights == Self.base.hasPackedWeights)
    }

    @Test(arguments: [Float(0.25), 1])
    func random_updateHasTheRequestedSizeAgainstAUnitProjection(strength: Float) throws {
        // Unit-variance inputs through (merged − base) should have about `strength` variance out.
        let config = Fixtures.tinyConfig(dim: 64)
        let weights = Fixtures.tinyWeights(config)
        let adapter = LowRankAdapter.random(for: weights, rank: 8, alpha: 16, projections: [.gate], layers: 0 ..< 1,
                                            strength: strength, seed: 9)
        let merged = try weights.merging(adapter)
        let target = LowRankAdapter.Target(layer: 0, projection: .gate)
        let before = Self.rows(weights, target), after = Self.rows(merged, target)
        var rng = SeededGenerator(seed: 1)
        var sum = 0.0, count = 0
        for _ in 0 ..< 64 {
            let x = (0 ..< config.dim).map { _ in Double((rng.nextUnitFloat() * 2 - 1) * Float(3).squareRoot()) }
            for i in before.indices {
                let y = before[i].indices.reduce(0.0) { $0 + (Double(after[i][$1]) - Double(before[i][$1])) * x[$1] }
                sum += y * y
                count += 1
            }
        }
        let variance = sum / Double(count)
        #expect(variance > 0.5 * Double(strength) && variance < 2 * Double(strength), "update variance \(variance)")
    }

    /// A rank-1 adapter file for layer 0's query projection whose factors are all `factor`.
    static func uniformAdapterFile(factor: Float, alpha: Float) -> Data {
        let dim = base.config.dim
        return handFile { g in
            g.metadata[3].2 = HandGGUF.le(alpha.bitPattern)
            g.tensors.removeAll()
            g.f32Tensor("blk.0.attn_q.weight.lora_a", [dim, 1], .init(repeating: factor, count: dim))
            g.f32Tensor("blk.0.attn_q.weight.lora_b", [1, dim], .init(repeating: factor, count: dim))
        }
    }

    static func uniformAdapter(factor: Float, alpha: Float) throws -> LowRankAdapter {
        try LowRankAdapter(ggufData: uniformAdapterFile(factor: factor, alpha: alpha))
    }

    /// Where `tensor`'s entry stands in the GGUF `data`.
    static func infoOffset(of tensor: String, in data: Data) throws -> Int {
        try #require(try GGUFFile(data: data).tensors.first { $0.name == tensor }).infoOffset
    }

    @Test func merging_keepsAnUpdateInRangeWhoseFactorsProductIsNot() throws {
        // 2^66 · 2^66 = 2^132 is beyond float32; under a scale of 2^-140 the update is 2^-8.
        let adapter = try Self.uniformAdapter(factor: 0x1p66, alpha: 0x1p-140)
        #expect(adapter.rank == 1 && adapter.scale == 0x1p-140)
        let merged = try Self.base.merging(adapter)
        let target = LowRankAdapter.Target(layer: 0, projection: .query)
        let before = Self.rows(Self.base, target), after = Self.rows(merged, target)
        for i in before.indices {
            for j in before[i].indices {
                #expect(after[i][j] == Float(Double(before[i][j]) + 0x1p-8), "[\(i), \(j)]")
            }
        }
    }

    @Test func merging_namesTheFactorWhoseUpdateLeavesFloat32sRange() throws {
        // 2^64 · 2^64 · 2 = 2^129, beyond float32's largest finite value (just under 2^128).
        let file = Self.uniformAdapterFile(factor: 0x1p64, alpha: 2), adapter = try LowRankAdapter(ggufData: file)
        let offset = try Self.infoOffset(of: "blk.0.attn_q.weight.lora_b", in: file)
        let fingerprint = ModelFingerprint(Self.base), query = Self.rows(Self.base, .init(layer: 0, projection: .query))
        Self.expectGGUF(try Self.base.merging(adapter)) { error in
            guard case let .invalidField("tensor blk.0.attn_q.weight.lora_b", byteOffset, reason) = error else { return false }
            return byteOffset == offset && byteOffset > 0 && reason.contains("row 0, column 0") && reason.contains("float32")
        }
        // The base weights are untouched: the merge works on a copy it drops.
        #expect(ModelFingerprint(Self.base) == fingerprint)
        #expect(Self.rows(Self.base, .init(layer: 0, projection: .query)) == query)
        // Just inside the range (2^127 · 1.5) it merges, finite.
        let largest = try Self.uniformAdapter(factor: 0x1p63, alpha: 1.5)
        let merged = try Self.base.merging(largest)
        #expect(Self.rows(merged, .init(layer: 0, projection: .query)).joined().allSatisfy { $0.isFinite && $0 > 0x1p126 })
    }

    @Test func merging_givesTheAdaptedModelItsOwnFingerprintEvenForAZeroUpdate() throws {
        let zero = LowRankAdapter.random(for: Self.base, rank: 2, strength: 0, seed: 1)
        let merged = try Self.base.merging(zero)
        let target = LowRankAdapter.Target(layer: 0, projection: .up)
        #expect(Self.rows(merged, target) == Self.rows(Self.base, target))
        #expect(ModelFingerprint(merged) != ModelFingerprint(Self.base))
        let other = LowRankAdapter.random(for: Self.base, rank: 2, strength: 0, seed: 2)
        let mergedOther = try Self.base.merging(other), mergedAgain = try Self.base.merging(zero)
        #expect(ModelFingerprint(mergedOther) != ModelFingerprint(merged))
        #expect(ModelFingerprint(mergedAgain) == ModelFingerprint(merged))
        // The base is untouched: merging copies.
        #expect(ModelFingerprint(Self.base) == zero.baseFingerprint)
    }

    @Test func merging_refusesOtherBaseWeights() throws {
        let adapter = LowRankAdapter.random(for: Self.base, rank: 2, seed: 1)
        let reseeded = Fixtures.tinyWeights(seed: 8)
        #expect(throws: ModelLoadError.incompatibleAdapter(name: "adapter", baseFingerprint: adapter.baseFingerprint.description,
                                                          modelFingerprint: ModelFingerprint(reseeded).description)) {
            try reseeded.merging(adapter)
        }
        let halfs = try Self.base.converted(to: .f16)
        #expect {
            try halfs.merging(adapter)
        } throws: { error in
            guard case .incompatibleAdapter = error as? ModelLoadError else { return false }
            return true
        }
    }

    @Test func merging_rejectsFactorsThatDoNotFitTheModel() throws {
        let outOfRangeFile = Self.handFile { g in
            g.f32Tensor("blk.5.attn_q.weight.lora_a", [Self.base.config.dim, 2], .init(repeating: 0, count: 2 * Self.base.config.dim))
            g.f32Tensor("blk.5.attn_q.weight.lora_b", [2, Self.base.config.dim], .init(repeating: 0, count: 2 * Self.base.config.dim))
        }
        let outOfRange = try LowRankAdapter(ggufData: outOfRangeFile)
        let layerOffset = try Self.infoOffset(of: "blk.5.attn_q.weight.lora_a", in: outOfRangeFile)
        Self.expectGGUF(try Self.base.merging(outOfRange)) {
            if case .invalidField("tensor blk.5.attn_q.weight.lora_a", layerOffset, _) = $0 { true } else { false }
        }
        // Several misfits: the lowest layer is named, whatever order the factors come in.
        let layers = Self.base.config.layerCount
        let misfits = try LowRankAdapter(ggufData: Self.handFile { g in
            for layer in (layers ..< layers + 8).reversed() {
                g.f32Tensor("blk.\(layer).attn_k.weight.lora_a", [Self.base.config.dim, 2], .init(repeating: 0, count: 2 * Self.base.config.dim))
                g.f32Tensor("blk.\(layer).attn_k.weight.lora_b", [2, Self.base.config.kvDim], .init(repeating: 0, count: 2 * Self.base.config.kvDim))
            }
        })
        Self.expectGGUF(try Self.base.merging(misfits)) {
            if case .invalidField("tensor blk.\(layers).attn_k.weight.lora_a", _, _) = $0 { true } else { false }
        }
        let narrowFile = Self.handFile { g in
            g.f32Tensor("blk.0.ffn_down.weight.lora_a", [3, 2], .init(repeating: 0, count: 6))
            g.f32Tensor("blk.0.ffn_down.weight.lora_b", [2, Self.base.config.dim], .init(repeating: 0, count: 2 * Self.base.config.dim))
        }
        let narrow = try LowRankAdapter(ggufData: narrowFile)
        let narrowOffset = try Self.infoOffset(of: "blk.0.ffn_down.weight.lora_a", in: narrowFile)
        Self.expectGGUF(try Self.base.merging(narrow)) {
            if case .shapeMismatch("blk.0.ffn_down.weight.lora_a", [Self.base.config.hiddenDim, 2], [3, 2], narrowOffset) = $0 { true } else { false }
        }
    }

    @Test func init_namesWhatIsWrongWithAMalformedFile() throws {
        func expect(_ data: Data, _ matches: (GGUFError) -> Bool, sourceLocation: SourceLocation = #_sourceLocation) {
            Self.expectGGUF(try LowRankAdapter(ggufData: data), matches, sourceLocation: sourceLocation)
        }
        try expect(Fixtures.tinyWeights().ggufData()) { if case .missingKey("general.type") = $0 { true } else { false } }
        expect(Self.handFile { $0.metadata[1].2 = HandGGUF.str("model") }) {
            if case .invalidField("general.type", _, _) = $0 { true } else { false }
        }
        expect(Self.handFile(fingerprint: "abc")) { if case .invalidField("kvsession.adapter.base_fingerprint", _, _) = $0 { true } else { false } }
        expect(Self.handFile { $0.metadata[5].2 = HandGGUF.str("[1, 2]") }) {
            if case .invalidField("kvsession.adapter.creator_defined_metadata", _, _) = $0 { true } else { false }
        }
        expect(Self.handFile { $0.metadata[3].2 = HandGGUF.le(Float.nan.bitPattern) }) {
            if case .invalidField("adapter.lora.alpha", _, _) = $0 { true } else { false }
        }
        expect(Self.handFile { $0.tensors.removeLast() }) { $0 == .missingTensor("blk.1.attn_v.weight.lora_b") }
        expect(Self.handFile { $0.f32Tensor("blk.0.attn_k.weight.lora_a", [32, 2], .init(repeating: 0, count: 64)) }) {
            $0 == .missingTensor("blk.0.attn_k.weight.lora_b")
        }
        expect(Self.handFile { g in
            g.f32Tensor("blk.0.attn_k.weight.lora_a", [32, 3], .init(repeating: 0, count: 96))
            g.f32Tensor("blk.0.attn_k.weight.lora_b", [3, 16], .init(repeating: 0, count: 48))
        }) { if case .shapeMismatch = $0 { true } else { false } }
        expect(Self.handFile { $0.f32Tensor("blk.0.attn_qkv.weight.lora_a", [32, 2], .init(repeating: 0, count: 64)) }) {
            if case .invalidField("tensor blk.0.attn_qkv.weight.lora_a", _, _) = $0 { true } else { false }
        }
        expect(Self.handFile { $0.f32Tensor("token_embd.weight", [32, 2], .init(repeating: 0, count: 64)) }) {
            if case .invalidField("tensor token_embd.weight", _, _) = $0 { true } else { false }
        }
        expect(Self.handFile { g in
            g.tensors[0].data = Array(g.tensors[0].data.dropLast(4)) + HandGGUF.le(Float.infinity.bitPattern)
        }) { if case .invalidField("tensor blk.1.attn_v.weight.lora_a", _, _) = $0 { true } else { false } }
        expect(Self.handFile { g in g.tensors.removeAll() }) { if case .missingTensor = $0 { true } else { false } }
        expect(Data(Self.handFile().dropLast(8))) { if case .truncatedTensorData("blk.1.attn_v.weight.lora_b", _, _, _) = $0 { true } else { false } }
    }

    static func expectGGUF(_ body: @autoclosure () throws -> some Any, _ matches: (GGUFError) -> Bool,
                           sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try body()
            Issue.record("no error", sourceLocation: sourceLocation)
        } catch let ModelLoadError.gguf(_, error) {
            #expect(matches(error), "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
    }
}
