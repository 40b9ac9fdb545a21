import Crypto
import Foundation

/// A low-rank (LoRA) adapter for one base model: for some projections of some layers, factors
/// `A` (`rank × in`) and `B` (`out × rank`), merged as `W' = W + (alpha / rank) · B · A`
/// (``ModelWeights/merging(_:memoryLimit:)``).
///
/// An adapter changes the weights, so it changes every cached key and value computed after the
/// first adapted layer: a model with an adapter has its own ``ModelFingerprint`` and never shares
/// K/V with its base model or with another adapter.
///
/// The file format is GGUF (version 3) as llama.cpp writes LoRA adapters: `general.type` is
/// `adapter`, `adapter.type` is `lora`, `adapter.lora.alpha` a float, and each adapted projection
/// has the tensors `blk.N.<projection>.weight.lora_a` (GGML dimensions `[in, rank]`) and
/// `.lora_b` (`[rank, out]`), in F32, F16 or Q8_0. Two keys are this package's own:
/// `kvsession.adapter.base_fingerprint`, the hex ``ModelFingerprint`` of the float32 base weights
/// the adapter was made for, and `kvsession.adapter.creator_defined_metadata`, a JSON object
/// (optional).
public struct LowRankAdapter: Sendable {
    /// A projection an adapter can change, named by its llama.cpp tensor stem.
    public enum Projection: String, CaseIterable, Sendable {
        /// The query projection (`attn_q`).
        case query = "attn_q"
        /// The key projection (`attn_k`).
        case key = "attn_k"
        /// The value projection (`attn_v`).
        case value = "attn_v"
        /// The attention output projection (`attn_output`).
        case output = "attn_output"
        /// The feed-forward gate projection, W1 (`ffn_gate`).
        case gate = "ffn_gate"
        /// The feed-forward up projection, W3 (`ffn_up`).
        case up = "ffn_up"
        /// The feed-forward down projection, W2 (`ffn_down`).
        case down = "ffn_down"
    }

    /// One adapted projection of one layer.
    public struct Target: Hashable, Sendable {
        /// The layer, 0 first.
        public let layer: Int
        /// The projection.
        public let projection: Projection

        /// A target.
        public init(layer: Int, projection: Projection) {
            self.layer = layer
            self.projection = projection
        }
    }

    /// The two factors of one target.
    public struct Factors: Sendable {
        /// `A`, `rank × in`: the input projected to the adapter's rank.
        public let a: Matrix
        /// `B`, `out × rank`: the rank back to the projection's outputs.
        public let b: Matrix
        /// Where the two tensors' entries stand in the adapter's file (0 for one made in memory),
        /// for errors the merge finds.
        package var byteOffsets: (a: Int, b: Int) = (0, 0)
    }

    /// The adapter's name (`general.name`).
    public let name: String
    /// The rank every factor pair shares.
    public let rank: Int
    /// LoRA's alpha; the update is scaled by ``scale`` = alpha / rank.
    public let alpha: Float
    /// The fingerprint of the float32 base weights this adapter was made for.
    public let baseFingerprint: ModelFingerprint
    /// The creator's metadata, a JSON object (`{}` when the file has none).
    public let creatorDefinedMetadata: String
    /// The factors of every adapted projection.
    public let factors: [Target: Factors]
    /// Hex SHA-256 of the adapter's file bytes: what names it in a merged model's config.
    public private(set) var identity: String

    /// The factor by which `B · A` is added: ``alpha`` / ``rank``.
    public var scale: Float { alpha / Float(rank) }

    /// Tensor names are `blk.N.<projection>.weight.lora_a|b`.
    private static let tensorSuffixes = (a: ".weight.lora_a", b: ".weight.lora_b")

    /// Reads an adapter file.
    /// - Throws: ``ModelLoadError/unreadable(path:reason:)``, or ``ModelLoadError/gguf(path:_:)``
    ///   naming the key or tensor that is missing, malformed or inconsistent.
    public init(contentsOf url: URL) throws(ModelLoadError) {
        try self.init(ggufData: ModelLoadError.mappedContents(of: url), path: url.path)
    }

    /// Reads an adapter from its GGUF bytes (see ``init(contentsOf:)``).
    public init(ggufData data: Data, path: String = "<memory>") throws(ModelLoadError) {
        do throws(GGUFError) {
            let file = try GGUFFile(data: data)
            for (key, expected) in [("general.type", "adapter"), ("adapter.type", "lora")] where try file.string(key) != expected {
                throw GGUFError.invalidField(field: key, byteOffset: file.offset(of: key), reason: "a LoRA adapter has '\(expected)' here")
            }
            alpha = try file.float("adapter.lora.alpha")
            guard alpha.isFinite else {
                throw GGUFError.invalidField(field: "adapter.lora.alpha", byteOffset: file.offset(of: "adapter.lora.alpha"), reason: "not finite")
            }
            let fingerprintKey = "kvsession.adapter.base_fingerprint"
            guard let fingerprint = ModelFingerprint(hex: try file.string(fingerprintKey)) else {
                throw GGUFError.invalidField(field: fingerprintKey, byteOffset: file.offset(of: fingerprintKey),
                                             reason: "not 64 hexadecimal digits")
            }
            baseFingerprint = fingerprint
            let metadataKey = "kvsession.adapter.creator_defined_metadata"
            creatorDefinedMetadata = file.metadata[metadataKey] == nil ? "{}" : try file.string(metadataKey)
            guard (try? JSONSerialization.jsonObject(with: Data(creatorDefinedMetadata.utf8))) is [String: Any] else {
                throw GGUFError.invalidField(field: metadataKey, byteOffset: file.offset(of: metadataKey), reason: "not a JSON object")
            }
            name = file.metadata["general.name"]?.stringValue ?? URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
            (rank, factors) = try Self.readFactors(file, data: data)
        } catch { throw .gguf(path: path, error) }
        identity = Self.digest(data)
    }

    /// An adapter with the given parts (``random(for:rank:alpha:projections:layers:strength:seed:name:creatorDefinedMetadata:)``).
    private init(name: String, rank: Int, alpha: Float, baseFingerprint: ModelFingerprint, creatorDefinedMetadata: String,
                 factors: [Target: Factors]) {
        self.name = name
        self.rank = rank
        self.alpha = alpha
        self.baseFingerprint = baseFingerprint
        self.creatorDefinedMetadata = creatorDefinedMetadata
        self.factors = factors
        identity = ""   // set by the caller, from the bytes
    }

    /// A synthetic adapter for `weights` (float32), drawn from `seed`: `A` keeps unit variance
    /// into the rank, `B` is scaled so that `scale · B · A` has about `strength` times the variance
    /// of a unit projection. The same arguments give the same adapter on every machine.
    /// - Parameters:
    ///   - weights: the base model (its fingerprint is recorded).
    ///   - rank: the factors' inner dimension, at least 1.
    ///   - alpha: LoRA's alpha (default: `rank`, a scale of 1).
    ///   - projections: which projections of each layer to adapt.
    ///   - layers: which layers (default: all).
    ///   - strength: the update's size relative to the weights' (default 0.25).
    ///   - seed: the generator's seed.
    ///   - name: `general.name`.
    ///   - creatorDefinedMetadata: a JSON object.
    public static func random(for weights: ModelWeights, rank: Int, alpha: Float? = nil, projections: [Projection] = Projection.allCases,
                              layers: Range<Int>? = nil, strength: Float = 0.25, seed: UInt64, name: String = "adapter",
                              creatorDefinedMetadata: String = "{}") -> LowRankAdapter {
        precondition(rank >= 1, "an adapter's rank is at least 1")
        let alpha = alpha ?? Float(rank)
        var factors: [Target: Factors] = [:]
        for layer in layers ?? 0 ..< weights.config.layerCount {
            for projection in projections {
                let (out, input) = weights.config.shape(of: projection)
                let target = Target(layer: layer, projection: projection)
                let stream = UInt64(layer) << 8 | UInt64(Projection.allCases.firstIndex(of: projection)!)
                let a = Matrix.zeros(rows: rank, cols: input), b = Matrix.zeros(rows: out, cols: rank)
                Kernels.fillUniform(a, seed: SeededGenerator.derive(seed, stream: stream << 1), scale: (3 / Float(input)).squareRoot())
                // A·x has unit variance per rank component; scale · B then sums `rank` of them.
                let bScale = (3 * strength / Float(rank)).squareRoot() * Float(rank) / alpha
                Kernels.fillUniform(b, seed: SeededGenerator.derive(seed, stream: stream << 1 | 1), scale: bScale)
                factors[target] = Factors(a: a, b: b)
            }
        }
        var adapter = LowRankAdapter(name: name, rank: rank, alpha: alpha, baseFingerprint: ModelFingerprint(weights),
                                     creatorDefinedMetadata: creatorDefinedMetadata, factors: factors)
        adapter.identity = digest(adapter.encoded(as: .f32))   // named by the bytes it saves as, as if read back
        return adapter
    }

    /// The adapter as a GGUF file, readable by ``init(contentsOf:)``; factors in `tensorType`
    /// (with Q8_0, a factor whose rows are not whole 32-weight blocks is written as F16). A factor
    /// beyond the encoding's range is written infinite, not refused: ``checkRange(for:)`` first.
    /// - Throws: ``ModelLoadError/unwritableEncoding(_:)`` for an encoding the package only reads.
    public func ggufData(tensorType: GGUFTensorType = .f32) throws(ModelLoadError) -> Data {
        guard tensorType.isWritable else { throw .unwritableEncoding(tensorType) }
        return encoded(as: tensorType)
    }

    /// ``ggufData(tensorType:)`` in a writable encoding.
    private func encoded(as tensorType: GGUFTensorType) -> Data {
        var writer = GGUFWriter()
        writer.set("general.architecture", .string("llama"))
        writer.set("general.type", .string("adapter"))
        writer.set("general.name", .string(name))
        writer.set("adapter.type", .string("lora"))
        writer.set("adapter.lora.alpha", .float32(alpha))
        writer.set("kvsession.adapter.base_fingerprint", .string(baseFingerprint.description))
        writer.set("kvsession.adapter.creator_defined_metadata", .string(creatorDefinedMetadata))
        for (name, matrix) in namedFactors {
            writer.add(name, matrix, type: tensorType.encoding(forRowLength: matrix.cols))
        }
        return writer.data()
    }

    /// Checks that ``ggufData(tensorType:)`` with `tensorType` would write every factor finite,
    /// by the rules of ``ModelWeights/checkRange(for:)``.
    /// - Throws: ``ModelLoadError/beyondHalfRange(tensor:count:largest:)`` or
    ///   ``ModelLoadError/beyondQ8_0Range(tensor:blocks:largest:)`` for the first factor (in file
    ///   order) that does not fit; ``ModelLoadError/unwritableEncoding(_:)`` for an encoding the
    ///   package only reads.
    public func checkRange(for tensorType: GGUFTensorType) throws(ModelLoadError) {
        guard tensorType.isWritable else { throw .unwritableEncoding(tensorType) }
        for (name, matrix) in namedFactors {
            if let error = ModelLoadError.encodingOverflow(tensor: name, WeightMatrix(matrix), as: tensorType) { throw error }
        }
    }

    /// Every factor with its GGUF tensor name, in file order: by layer, then projection, A before B.
    private var namedFactors: [(name: String, matrix: Matrix)] {
        let ordered = factors.keys.sorted { ($0.layer, Projection.allCases.firstIndex(of: $0.projection)!)
            < ($1.layer, Projection.allCases.firstIndex(of: $1.projection)!) }
        return ordered.flatMap { target in
            let stem = "blk.\(target.layer).\(target.projection.rawValue)"
            return [(stem + Self.tensorSuffixes.a, factors[target]!.a), (stem + Self.tensorSuffixes.b, factors[target]!.b)]
        }
    }

    /// The rank and the factors of every `blk.N.<projection>.weight.lora_a|b` pair in `file`.
    private static func readFactors(_ file: GGUFFile, data: Data) throws(GGUFError) -> (Int, [Target: Factors]) {
        var pairs: [Target: (a: GGUFTensorInfo?, b: GGUFTensorInfo?)] = [:]
        for info in file.tensors {
            guard let (target, isA) = parseName(info.name) else {
                throw .invalidField(field: "tensor \(info.name)", byteOffset: info.infoOffset,
                                    reason: "not a LoRA factor (blk.N.<projection>.weight.lora_a or .lora_b)")
            }
            guard info.dimensions.count == 2 else {
                throw .shapeMismatch(tensor: info.name, expected: [-1, -1], found: info.dimensions, byteOffset: info.infoOffset)
            }
            if isA { pairs[target, default: (nil, nil)].a = info } else { pairs[target, default: (nil, nil)].b = info }
        }
        guard let first = pairs.values.first else { throw .missingTensor("blk.N.<projection>.weight.lora_a") }
        let rank = first.a?.dimensions[1] ?? first.b!.dimensions[0]   // GGUF dimensions are at least 1
        var factors: [Target: Factors] = [:]
        for (target, pair) in pairs {
            let stem = "blk.\(target.layer).\(target.projection.rawValue)"
            guard let a = pair.a else { throw .missingTensor(stem + tensorSuffixes.a) }
            guard let b = pair.b else { throw .missingTensor(stem + tensorSuffixes.b) }
            guard a.dimensions[1] == rank else {
                throw .shapeMismatch(tensor: a.name, expected: [a.dimensions[0], rank], found: a.dimensions, byteOffset: a.infoOffset)
            }
            guard b.dimensions[0] == rank else {
                throw .shapeMismatch(tensor: b.name, expected: [rank, b.dimensions[1]], found: b.dimensions, byteOffset: b.infoOffset)
            }
            factors[target] = Factors(a: try load(a, from: data), b: try load(b, from: data),
                                      byteOffsets: (a.infoOffset, b.infoOffset))
        }
        return (rank, factors)
    }

    /// `blk.N.<projection>.weight.lora_a` → (target, true); `.lora_b` → (target, false).
    private static func parseName(_ name: String) -> (Target, Bool)? {
        let isA = name.hasSuffix(tensorSuffixes.a)
        guard isA || name.hasSuffix(tensorSuffixes.b), name.hasPrefix("blk.") else { return nil }
        let parts = name.dropFirst(4).dropLast(tensorSuffixes.a.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].allSatisfy(\.isASCII), let layer = Int(parts[0]), layer >= 0, layer < 1 << 20,
              let projection = Projection(rawValue: String(parts[1])) else { return nil }
        return (Target(layer: layer, projection: projection), isA)
    }

    /// A tensor's values as a float32 matrix (GGML `[cols, rows]`); every value must be finite.
    private static func load(_ info: GGUFTensorInfo, from data: Data) throws(GGUFError) -> Matrix {
        let matrix = Matrix.zeros(rows: info.dimensions[1], cols: info.dimensions[0])
        info.type.decode(from: data, byteOffset: info.dataOffset, into: matrix)
        guard matrix.toArray().allSatisfy(\.isFinite) else {
            throw .invalidField(field: "tensor \(info.name)", byteOffset: info.infoOffset, reason: "holds a value that is not finite")
        }
        return matrix
    }

    private static func digest(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }
}

extension ModelConfig {
    /// The (outputs, inputs) of one projection in these dimensions.
    package func shape(of projection: LowRankAdapter.Projection) -> (out: Int, in: Int) {
        switch projection {
        case .query, .output: (dim, dim)
        case .key, .value: (kvDim, dim)
        case .gate, .up: (hiddenDim, dim)
        case .down: (dim, hiddenDim)
        }
    }
}
