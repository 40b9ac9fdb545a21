import Foundation

extension ModelWeights {
    /// These weights with `adapter` merged: every adapted projection becomes
    /// `W + (alpha / rank) · B · A` (``Kernels/addLowRankProduct(_:_:scale:to:)``: summed in
    /// double and rounded once, the same bits on every CPU), the config records the adapter's
    /// ``LowRankAdapter/identity`` (so the merged model's ``ModelFingerprint`` is its own), and the
    /// result is packed for streaming like any loaded model. `self` is left as it was, also when
    /// the merge throws. Merge float32 weights, then convert.
    /// - Parameter memoryLimit: the most bytes running the merged model may need.
    /// - Throws: ``ModelLoadError/incompatibleAdapter(name:baseFingerprint:modelFingerprint:)`` when the
    ///   adapter was made for other weights; ``ModelLoadError/gguf(path:_:)`` naming a factor whose
    ///   layer or shape does not fit this model, or whose update takes a weight beyond float32's
    ///   range; the memory errors of allocating the copy.
    public func merging(_ adapter: LowRankAdapter, memoryLimit: Int = MemoryLimit.bytes) throws(ModelLoadError) -> ModelWeights {
        let fingerprint = ModelFingerprint(self)
        guard precision == .f32, fingerprint == adapter.baseFingerprint else {
            throw .incompatibleAdapter(name: adapter.name, baseFingerprint: adapter.baseFingerprint.description,
                                       modelFingerprint: fingerprint.description)
        }
        // In layer and projection order, so that an error names the same tensor every time.
        let ordered = adapter.factors.sorted { ($0.key.layer, $0.key.projection.order) < ($1.key.layer, $1.key.projection.order) }
        for (target, factors) in ordered {
            let stem = "blk.\(target.layer).\(target.projection.rawValue).weight"
            guard target.layer < config.layerCount else {
                throw .gguf(path: adapter.name, .invalidField(field: "tensor \(stem).lora_a", byteOffset: factors.byteOffsets.a,
                                                              reason: "layer \(target.layer) of a model with \(config.layerCount) layers"))
            }
            let (out, input) = config.shape(of: target.projection)
            guard factors.a.cols == input else {
                throw .gguf(path: adapter.name, .shapeMismatch(tensor: stem + ".lora_a", expected: [input, adapter.rank],
                                                               found: [factors.a.cols, factors.a.rows], byteOffset: factors.byteOffsets.a))
            }
            guard factors.b.rows == out else {
                throw .gguf(path: adapter.name, .shapeMismatch(tensor: stem + ".lora_b", expected: [adapter.rank, out],
                                                               found: [factors.b.cols, factors.b.rows], byteOffset: factors.byteOffsets.b))
            }
        }
        var merged = config
        merged.adapter = adapter.identity
        let copy: ModelWeights
        do { copy = try unpackedCopy(config: merged, memoryLimit: memoryLimit) } catch let error as ModelLoadError {
            throw error
        } catch { throw .allocationFailed(bytes: byteCount) }
        for (target, factors) in ordered {
            let weights = copy.layers[target.layer].matrix(target.projection)
            guard let cell = Kernels.addLowRankProduct(factors.b, factors.a, scale: adapter.scale, to: weights) else { continue }
            throw .gguf(path: adapter.name, .invalidField(
                field: "tensor blk.\(target.layer).\(target.projection.rawValue).weight.lora_b", byteOffset: factors.byteOffsets.b,
                reason: "its update takes the weight at row \(cell.row), column \(cell.column) beyond float32's range"))
        }
        return copy.finishedLoading()
    }
}

extension LowRankAdapter.Projection {
    /// The projection's place in ``allCases``: the order merges visit and report them in.
    fileprivate var order: Int { Self.allCases.firstIndex(of: self) ?? 0 }
}

extension LayerWeights {
    /// The weights of one projection (a view of the fused matrix it lives in).
    package func weights(_ projection: LowRankAdapter.Projection) -> WeightMatrix {
        let hidden = gateUp.rows / 2
        return switch projection {
        case .query: wq
        case .key: wk
        case .value: wv
        case .output: wo
        case .gate: gateUp.rows(0 ..< hidden)
        case .up: gateUp.rows(hidden ..< 2 * hidden)
        case .down: down
        }
    }

    /// The float32 rows of one projection (plain rows only).
    fileprivate func matrix(_ projection: LowRankAdapter.Projection) -> Matrix { weights(projection).floats }
}
