import Foundation
@testable import LMRuntime
import LMTestSupport
import Testing

/// Reading every GGML encoding the package supports: the block decoders against gguf-py's numpy
/// dequantizers (an implementation that shares no code with the package), and the loaders'
/// plumbing of those decoders into a model's matrices.
@Suite struct GGMLBlocksTests {
    /// `Tests/Fixtures/ggml-blocks.gguf`, written by `Scripts/make-ggml-blocks-fixture.py`.
    static let fixture = Fixtures.packageRoot.appendingPathComponent("Tests/Fixtures/ggml-blocks.gguf")

    static func matrix(_ info: GGUFTensorInfo, in file: GGUFFile) -> Matrix {
        let m = Matrix.zeros(rows: info.dimensions[1], cols: info.dimensions[0])
        info.type.decode(from: file.data, byteOffset: info.dataOffset, into: m)
        return m
    }

    @Test(arguments: GGUFTensorType.allCases.filter { $0 != .f32 })
    func decode_givesGGUFPyDequantizersBits(type: GGUFTensorType) throws {
        let file = try GGUFFile(data: Data(contentsOf: Self.fixture))
        let name = type.ggmlName.lowercased()
        let encoded = try #require(file.tensor(named: name), "the fixture has no \(type.ggmlName) tensor: rerun the script")
        let expected = try #require(file.tensor(named: name + ".expected"))
        #expect(encoded.type == type && expected.type == .f32 && encoded.dimensions == expected.dimensions)
        #expect(encoded.byteCount == encoded.elementCount / type.blockSize * type.bytesPerBlock)
        let decoded = Self.matrix(encoded, in: file).toArray(), reference = Self.matrix(expected, in: file).toArray()
        var mismatches = 0, nonFinite = 0
        for (i, (a, b)) in zip(decoded, reference).enumerated() where !(a.bitPattern == b.bitPattern || a.isNaN && b.isNaN) {
            if mismatches < 3 { Issue.record("\(type.ggmlName) weight \(i): \(a), gguf-py \(b)") }
            mismatches += 1
        }
        for value in decoded where !value.isFinite { nonFinite += 1 }
        #expect(mismatches == 0, "\(mismatches) of \(decoded.count) weights differ")
        // The fixture's last block has an infinite scale (block encodings), so some weights are not finite.
        #expect((nonFinite > 0) == (type.blockSize > 1), "\(nonFinite) weights not finite")
    }

    @Test(arguments: GGUFTensorType.allCases.filter { $0.blockSize > 1 || $0 == .bf16 })
    func gguf_loadsAModelWhoseMatricesAreInTheEncoding(type: GGUFTensorType) throws {
        // Rows of 256 weights (whole K-quant super-blocks): dim 256, FFN 768.
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(dim: 256, layerCount: 1))
        var writer = weights.ggufWriter(tokenizer: nil, fileType: 0)
        var rng = SeededGenerator(seed: UInt64(type.rawValue))
        var encoded: [String: Data] = [:]
        for t in weights.ggufTensors() {
            if t.vector {
                writer.add(t.name, t.matrix.floatMatrix(), type: .f32, vector: true)
                continue
            }
            let bytes = t.matrix.rows * t.matrix.cols / type.blockSize * type.bytesPerBlock
            var data = Data((0 ..< bytes).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            // Every half field of every block finite and small: a half whose top byte is 0x3B.
            data.withUnsafeMutableBytes { raw in for i in stride(from: 1, to: bytes, by: 2) { raw[i] &= 0x3B } }
            encoded[t.name] = data
            writer.addEncoded(t.name, dimensions: [t.matrix.cols, t.matrix.rows], type: type, bytes: data)
        }
        let loaded = try ModelWeights.gguf(data: writer.data())
        for t in loaded.ggufTensors() where !t.vector {
            let data = try #require(encoded[t.name])
            let expected = Matrix.zeros(rows: t.matrix.rows, cols: t.matrix.cols)
            type.decode(from: data, byteOffset: 0, into: expected)
            #expect(t.matrix.floatMatrix().toArray() == expected.toArray(), "\(t.name)")
            #expect(expected.toArray().allSatisfy { $0.isFinite }, "\(t.name)")
        }
        // And it runs: a step's logits are finite.
        let transformer = Transformer(weights: loaded)
        let logits = try transformer.forward([1, 2, 3], cache: transformer.makeCache())
        #expect(logits.toArray().allSatisfy { $0.isFinite })
    }

    @Test func decode_rowsStartAtTheirOwnBlocks() {
        // Two rows of one Q4_0 block each: row 1 must decode the second block, not the first again.
        var data = Data()
        for (scale, nibble) in [(Float(1), UInt8(0x99)), (Float(2), UInt8(0x33))] {
            withUnsafeBytes(of: Kernels.halfBits(scale).littleEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: repeatElement(nibble, count: 16))
        }
        let m = Matrix.zeros(rows: 2, cols: 32)
        GGUFTensorType.q4_0.decode(from: data, byteOffset: 0, into: m)
        #expect(m.row(0).toArray() == Array(repeating: 1, count: 32))    // 1 · (9 − 8)
        #expect(m.row(1).toArray() == Array(repeating: -10, count: 32))  // 2 · (3 − 8)
    }

    @Test(arguments: GGUFTensorType.allCases.filter { !$0.isWritable })
    func ggufData_refusesAnEncodingItOnlyReads(type: GGUFTensorType) {
        let weights = Fixtures.tinyWeights()
        #expect(throws: ModelLoadError.unwritableEncoding(type)) { try weights.ggufData(tensorType: type) }
        #expect(throws: ModelLoadError.unwritableEncoding(type)) { try weights.checkRange(for: type) }
        let adapter = LowRankAdapter.random(for: weights, rank: 2, alpha: 4, projections: [.query], seed: 1)
        #expect(throws: ModelLoadError.unwritableEncoding(type)) { try adapter.ggufData(tensorType: type) }
        #expect(throws: ModelLoadError.unwritableEncoding(type)) { try adapter.checkRange(for: type) }
        #expect(ModelLoadError.unwritableEncoding(type).description.contains(type.ggmlName))
    }

    @Test func init_refusesRowsThatAreNotWholeSuperBlocks() throws {
        var writer = GGUFWriter()
        writer.addEncoded("w", dimensions: [128, 2], type: .q4_K, bytes: Data(count: 144))
        #expect {
            _ = try GGUFFile(data: writer.data())
        } throws: { error in
            guard case let GGUFError.invalidField(field, _, reason) = error else { return false }
            return field == "tensor w dimensions" && reason.contains("block size 256")
        }
        var short = GGUFWriter()
        short.addEncoded("w", dimensions: [256, 2], type: .q6_K, bytes: Data(count: 210))   // two rows need 420 bytes
        #expect {
            _ = try GGUFFile(data: short.data())
        } throws: { error in
            guard case let GGUFError.truncatedTensorData(tensor, _, byteCount, _) = error else { return false }
            return tensor == "w" && byteCount == 420
        }
    }
}
