import Foundation
import LMRuntime

/// What `kvbench kernels` prints for one model.
struct ModelReport: Encodable {
    struct Prefill: Encodable {
        let tokens: Int
        let tokens_per_second: Double
        let gflops: Double
        let sgemm_gflops: Double
        let ratio_to_sgemm: Double
        let sgemm_peak_gflops: Double
        let ratio_to_sgemm_peak: Double
        /// The measured pass per layer, and its steps timed alone (with `--breakdown`).
        let pass_ms_per_layer: Double
        let breakdown: [KernelTime]?
    }

    /// A short pass on top of a cached prefix: the time to first token of a cache hit.
    struct Incremental: Encodable {
        let cached_tokens: Int
        let new_tokens: Int
        let ms: Double
        /// Weights once, plus the K/V rows attention reads.
        let bytes_streamed: Double
        /// Projections, classifier, and attention over every visible key.
        let gflop: Double
        /// max(bytes ÷ DRAM read ceiling, FLOPs ÷ sgemm ceiling).
        let roofline_ms: Double
        let ratio_to_roofline: Double
        /// The read ceiling in the pairs (median): four reads of the probe, then one pass.
        let paired_read_gbps: Double
        /// Median over the pairs of the pass ÷ its roofline with the pair's own read ceiling.
        let paired_ratio_to_roofline: Double
        /// The compute ceiling in the same pairs (median): the run's sgemm ceiling scaled by what
        /// the cores did just before the pass, every worker's one-thread sgemm at once
        /// (``KernelProbe/ComputeProbe``), against the best the run saw of that.
        let paired_sgemm_gflops: Double
        /// Median over the pairs of the pass ÷ its roofline with both of the pair's ceilings.
        let paired_ceilings_ratio_to_roofline: Double
        let breakdown: [KernelTime]?
    }

    let model: String
    let precision: String
    let parameters: Int
    let sgemm_gflops: Double
    let prefill: [Prefill]
    let incremental: [Incremental]
    let decode_tokens_per_second: Double
    let decode_weight_gbps: Double
    let decode_ratio_to_sgemv: Double
    /// The read ceiling measured between decode windows (the median of the pairs).
    let decode_read_gbps: Double
    /// Decode's weight bytes per second ÷ the read ceiling measured just before, over windows of
    /// four tokens and four reads: the median of the pairs.
    let decode_ratio_to_read: Double
    /// In the same pairs, the token's roofline ÷ its time: the roofline is max(weight bytes ÷ the
    /// pair's read ceiling, halfs converted ÷ the conversion ceiling), the second for f16 only.
    let decode_ratio_to_roofline: Double
}

/// The whole `kvbench kernels` result.
struct KernelReport: Encodable {
    let blas_core_type: String
    /// The kernels OpenBLAS chose itself where the runtime replaced them (its generic `Prescott`).
    let blas_core_type_replaced: String?
    /// The runtime's own projection kernels on this machine: `avx512`, `avx2` or `portable`.
    let skinny_kernels: String
    /// Where the kernels' software prefetches land: `L2` (the Zen 4 family's default) or `L1`.
    let prefetch_level: String
    /// Streams of weights a thread's share of a decode step reads at once: 1 (the Zen 4 family's
    /// default with AVX-512) or 2.
    let decode_streams: Int
    /// Whether tiles of more than twelve float32 activation rows take two groups of weight rows
    /// at a time (the Emerald Rapids default with AVX-512).
    let pair_tiles: Bool
    /// Whether few-query attention's weighted values take 32-key chunks rather than a dense copy of
    /// the value rows (the Emerald Rapids default with AVX-512).
    let attention_value_chunks: Bool
    /// Activation rows up to which passes beyond the skinny kernel's 64 run its tiles a block of
    /// packed weight rows at a time instead of sgemm, float32 and half (64: never).
    let blocked_skinny_rows_f32: Int
    let blocked_skinny_rows_f16: Int
    let threads: Int
    let read_gbps: Double
    /// Streams a thread read the read ceiling as (1, 2, 4 or 8: the count that read fastest);
    /// every paired read uses it too.
    let read_streams_per_thread: Int
    let sgemv_gbps: Double
    /// Billions of halfs per second all threads convert (and add) from their caches.
    let conversion_ghalfs: Double
    let models: [ModelReport]
    let precision_comparisons: [PrecisionComparison]

    var table: String {
        var lines = ["DRAM read ceiling (streaming read, all threads, \(read_streams_per_thread) streams a thread): \(fmt(read_gbps)) GB/s; sgemv (weights streamed from DRAM): \(fmt(sgemv_gbps)) GB/s",
                     "half conversion ceiling (halfs in cache converted and added, all threads): \(fmt(conversion_ghalfs)) G halfs/s",
                     "runtime threads: \(threads), OpenBLAS core type: \(blas_core_type)\(blas_core_type_replaced.map { " (replacing \($0))" } ?? ""), skinny kernels: \(skinny_kernels), prefetches into \(prefetch_level), decode streams a thread: \(decode_streams), "
                        + "tiles of two groups beyond 12 float32 rows: \(pair_tiles ? "yes" : "no"), attention's values in 32-key chunks: \(attention_value_chunks ? "yes" : "no"), "
                        + "skinny tiles in blocks up to \(blocked_skinny_rows_f32) (f32) / \(blocked_skinny_rows_f16) (f16) rows", ""]
        for m in models {
            lines.append("\(m.model), \(m.precision) weights (\(m.parameters / 1000)K parameters), fastest sgemm at its shapes: \(fmt(m.sgemm_gflops)) GFLOP/s")
            lines.append("  prefill  tokens   tokens/s   GFLOP/s   sgemm GFLOP/s (its GEMMs, fastest)   ÷ its GEMMs   ÷ fastest")
            for p in m.prefill {
                let sgemm = "\(fmt(p.sgemm_gflops)), \(fmt(p.sgemm_peak_gflops))"
                lines.append("           \(pad(p.tokens, 6)) \(pad(fmt(p.tokens_per_second), 10)) \(pad(fmt(p.gflops), 9))   \(pad(sgemm, 34)) \(pad(fmt(p.ratio_to_sgemm), 13)) \(pad(fmt(p.ratio_to_sgemm_peak), 11))")
            }
            for p in m.prefill {
                guard let steps = p.breakdown else { continue }
                let sum = steps.map(\.ms_per_layer).reduce(0, +)
                lines.append("  \(p.tokens) tokens, ms per layer, each step timed alone: "
                    + steps.map { "\($0.kernel) \(fmt($0.ms_per_layer))" }.joined(separator: " · "))
                lines.append("    in layer order over all layers: " + steps.map { "\($0.kernel) \(fmt($0.ms_per_layer_in_sequence))" }.joined(separator: " · "))
                let inSequence = steps.map(\.ms_per_layer_in_sequence).reduce(0, +)
                lines.append("    sums \(fmt(sum)) alone, \(fmt(inSequence)) in order; measured pass \(fmt(p.pass_ms_per_layer)) per layer")
            }
            if !m.incremental.isEmpty {
                lines.append("  incremental prefill on \(m.incremental[0].cached_tokens) cached tokens: new tokens, ms, roofline ms (bytes ÷ read, FLOPs ÷ sgemm), ÷ roofline; "
                    + "÷ roofline in pairs (median: 4 reads, then one pass) and the pairs' read GB/s; "
                    + "÷ roofline with the sgemm ceiling paired too (a probe of every core between reads and pass) and that ceiling's GFLOP/s")
                for i in m.incremental {
                    lines.append("           \(pad(i.new_tokens, 6)) \(pad(fmt(i.ms), 9)) \(pad(fmt(i.roofline_ms), 9))   \(pad(fmt(i.ratio_to_roofline), 6))"
                        + "   \(pad(fmt(i.paired_ratio_to_roofline), 6)) \(pad(fmt(i.paired_read_gbps), 6))"
                        + "   \(pad(fmt(i.paired_ceilings_ratio_to_roofline), 6)) \(pad(fmt(i.paired_sgemm_gflops), 6))")
                    if let steps = i.breakdown {
                        lines.append("             ms per layer, each step timed alone: " + steps.map { "\($0.kernel) \(fmt($0.ms_per_layer))" }.joined(separator: " · "))
                        lines.append("             in layer order over all layers: " + steps.map { "\($0.kernel) \(fmt($0.ms_per_layer_in_sequence))" }.joined(separator: " · "))
                    }
                }
            }
            lines.append("  decode   \(fmt(m.decode_tokens_per_second)) tokens/s, \(fmt(m.decode_weight_gbps)) GB/s of weights, ÷ read ceiling \(fmt(m.decode_ratio_to_read)) (median of pairs: 4 reads at \(fmt(m.decode_read_gbps)) GB/s, then 4 tokens), ÷ sgemv \(fmt(m.decode_ratio_to_sgemv))"
                + (m.precision == WeightPrecision.f16.rawValue ? ", ÷ roofline \(fmt(m.decode_ratio_to_roofline)) (max of bytes ÷ read, halfs ÷ conversion ceiling)" : ""))
            lines.append("")
        }
        for c in precision_comparisons {
            let d = c.deviation
            lines.append("\(c.model): f16 against f32 weights")
            lines.append("  decode \(fmt(c.decode_speedup))× the tokens/s, \(fmt(c.decode_speedup_paired))× in pairs (the read and conversion ceilings allow \(fmt(c.decode_speedup_ceiling))×); prefill of \(c.prefill_tokens) tokens ÷ its GEMMs' sgemm: f16 \(fmt(c.f16_prefill_ratio_to_sgemm)), f32 \(fmt(c.f32_prefill_ratio_to_sgemm))")
            lines.append("  logits over \(d.positions) greedy tokens (f32's, fed to both): max |Δ| \(String(format: "%.3g", d.maxAbsoluteError)) (largest logit \(fmt(d.maxReferenceLogit))), "
                + "KL mean \(String(format: "%.2g", d.meanKLDivergence)) / max \(String(format: "%.2g", d.maxKLDivergence)) nats, "
                + "same argmax \(String(format: "%.1f", 100 * d.argmaxAgreement))%, f16's own greedy run identical for \(d.identicalGreedyPrefix) of \(d.positions) tokens")
            lines.append("")
        }
        return lines.joined(separator: "\n")
    }

    private func fmt(_ x: Double) -> String { String(format: x >= 100 ? "%.0f" : x >= 10 ? "%.1f" : "%.2f", x) }
    private func pad(_ x: some CustomStringConvertible, _ n: Int) -> String {
        let s = "\(x)"
        return String(repeating: " ", count: max(0, n - s.count)) + s
    }
}

/// Times BLAS ceilings and model passes; the best of `repeats` runs counts.
struct KernelProbe {
    /// Also time each step of a layer alone (``KernelBreakdown``).
    var breakdown = false
    /// Bytes the sgemv ceiling streams: far beyond any last-level cache.
    static let streamBytes = 512 << 20
    let repeats: Int

    /// Matrix–vector throughput over `streamBytes` of weights, in GB/s: the faster of
    /// OpenBLAS's own threading and the runtime's split over its workers.
    func sgemvGBps() -> Double {
        let cols = 1024, rows = Self.streamBytes / (4 * cols)
        let a = Matrix.zeros(rows: rows, cols: cols)
        LMRuntime.Kernels.fillUniform(a, seed: 1, scale: 1)
        let x = Matrix.zeros(rows: 1, cols: cols), y = Matrix.zeros(rows: 1, cols: rows)
        let best = fastest(runs: max(repeats, 3), calls: 8, [{ LMRuntime.Kernels.matmul(x, transposed: a, into: y) }])
        return Double(Self.streamBytes) / best[0] / 1e9
    }

    /// Streams a thread's share of every read probe is read as (``readGBps()`` picks them).
    var readStreams = 2

    /// Streaming-read throughput over `streamBytes` on all workers, in GB/s: the machine's DRAM
    /// read ceiling, which decode (every weight once per token) cannot beat. Each thread reads its
    /// band as 1, 2, 4 or 8 streams, whichever reads fastest here (a core keeps more lines in
    /// flight with more streams on some CPUs, not on others), and later reads use that count.
    mutating func readGBps() -> Double {
        let a = readProbe()
        let best = Self.readStreamCounts.map { streams in
            (streams: streams, seconds: (0 ..< max(repeats, 3)).map { _ in readSeconds(a, streams: streams) }.min()!)
        }.min { $0.seconds < $1.seconds }!
        readStreams = best.streams
        return Double(Self.streamBytes) / best.seconds / 1e9
    }

    /// The stream counts a thread's read is timed with for the read ceiling.
    static let readStreamCounts = [1, 2, 4, 8]

    /// The `streamBytes` a read-ceiling measurement streams.
    func readProbe() -> Matrix {
        let a = Matrix.zeros(rows: Self.streamBytes / (4 * 1024), cols: 1024)
        LMRuntime.Kernels.fillUniform(a, seed: 4, scale: 1)
        return a
    }

    /// Seconds one streaming read of `probe` takes on all workers, each thread reading `streams`
    /// streams (by default ``readStreams``; the mean of four back to back).
    func readSeconds(_ probe: Matrix, streams: Int? = nil) -> Double {
        var sink: Float = 0
        let streams = streams ?? readStreams
        let time = seconds { for _ in 0 ..< 4 { sink += LMRuntime.Kernels.streamingSum(probe, streams: streams) } } / 4
        if sink.isNaN { progress("(read probe: NaN)") }   // keeps the sum alive
        return time
    }

    /// sgemm GFLOP/s for each `[m, k] · [n, k]ᵀ` in `shapes`, each timed over `calls` back-to-back calls.
    func sgemmGFLOPs(m: Int, shapes: [(n: Int, k: Int)], calls: Int) -> [Double] {
        let products = shapes.map { n, k in
            let a = Matrix.zeros(rows: m, cols: k), b = Matrix.zeros(rows: n, cols: k), c = Matrix.zeros(rows: m, cols: n)
            LMRuntime.Kernels.fillUniform(a, seed: 2, scale: 1)
            LMRuntime.Kernels.fillUniform(b, seed: 3, scale: 1)
            return { LMRuntime.Kernels.matmul(a, transposed: b, into: c) }
        }
        return zip(shapes, fastest(runs: 1, calls: calls, products)).map { shape, time in
            2 * Double(m * shape.n * shape.k) / time / 1e9
        }
    }

    /// The time per call of each body: the best of `runs` timed runs of `calls` back-to-back
    /// calls (after a warm-up call), taking the better of the runtime's own threading and
    /// OpenBLAS's: the ceiling is whichever this machine does best.
    ///
    /// Timing a block as long as the model's own pass, rather than one short call, gives the
    /// ceiling the same exposure to a noisy machine as the pass it is compared with.
    private func fastest(runs: Int, calls: Int, _ bodies: [() -> Void]) -> [Double] {
        func best(_ body: () -> Void) -> Double {
            body()
            return (0 ..< runs).map { _ in seconds { for _ in 0 ..< calls { body() } } }.min()! / Double(calls)
        }
        let runtime = bodies.map(best)
        let openBLAS = LMRuntime.Kernels.withOpenBLASThreads(LMRuntime.Kernels.workerCount) { bodies.map(best) }
        // OpenBLAS's threads spin for about 0.1 s after their last call; let them park before
        // anything else is timed, or they compete with the runtime's threads for the cores.
        Thread.sleep(forTimeInterval: 0.25)
        return zip(runtime, openBLAS).map { min($0, $1) }
    }

    /// sgemm throughput on exactly the projection GEMMs one forward pass of `tokens` tokens runs
    /// (Q|K|V stacked, O, gate|up, down; FLOP-weighted), and the fastest of those shapes alone.
    func sgemmCeiling(_ c: ModelConfig, tokens: Int) -> (model: Double, peak: Double) {
        let shapes = [(c.dim + 2 * c.kvDim, c.dim), (c.dim, c.dim), (2 * c.hiddenDim, c.dim), (c.dim, c.hiddenDim)]
        var flops = 0.0, time = 0.0
        let rates = sgemmGFLOPs(m: tokens, shapes: shapes, calls: c.layerCount)
        for ((n, k), rate) in zip(shapes, rates) {
            let work = 2 * Double(tokens * n * k) / 1e9
            flops += work
            time += work / rate
        }
        return (flops / time, rates.max()!)
    }

    /// Halfs each worker converts over and over in the conversion probe: 128 KiB, beyond any
    /// core's L1 and within its L2, as a decode tile's rows are once they arrive.
    static let conversionHalfs = 64 << 10

    /// The half-conversion ceiling in billions of halfs per second: every worker converts and
    /// adds `conversionHalfs` halfs held in its cache, over and over (``Kernels/repeatedHalfSums``).
    /// A kernel streaming half weights cannot beat it, wherever they come from.
    func conversionGHalfs() -> Double {
        let passes = 1024
        let halfs = (0 ..< Self.conversionHalfs).map { LMRuntime.Kernels.halfBits(Float($0 % 97) / 97 - 0.5) }
        var sink: Float = 0
        let best = halfs.withUnsafeBufferPointer { buffer in
            // About 10 ms a run on two Zen 1 cores: cheap enough to take the best of many, which a
            // worker that starts late (a busy host) would otherwise halve.
            (0 ..< 3 * max(repeats, 3)).map { _ in
                seconds { sink += LMRuntime.Kernels.repeatedHalfSums(buffer.baseAddress!, count: buffer.count, passes: passes) }
            }.min()!
        }
        if sink.isNaN { progress("(conversion probe: NaN)") }   // keeps the sums alive
        return Double(Self.conversionHalfs * passes * LMRuntime.Kernels.workerCount) / best / 1e9
    }

    func measure(_ weights: ModelWeights, prefillLengths: [Int], incremental: [Int], cachedTokens: Int, decodeTokens: Int,
                 sgemvGBps: Double, readGBps: Double, conversionGHalfs: Double) -> ModelReport {
        let c = weights.config
        let lengths = prefillLengths.filter { $0 <= c.contextLength }
        let model = Transformer(weights: weights, maxBatch: max(lengths.max() ?? 1, incremental.max() ?? 1))   // one pass each
        let cache = model.makeCache()
        var prefills: [ModelReport.Prefill] = []
        for n in lengths {
            let tokens = (0 ..< n).map { ($0 * 7919 + 11) % c.vocabSize }
            // Alternate ceiling and model runs so both see the same machine load; keep the best of each.
            var ceiling = 0.0, peak = 0.0, best = Double.infinity
            for _ in 0 ..< repeats {
                let measured = sgemmCeiling(c, tokens: n)
                ceiling = max(ceiling, measured.model)
                peak = max(peak, measured.peak)
                cache.truncate(to: 0)
                best = min(best, seconds { _ = try? model.forward(tokens, cache: cache) })
            }
            let gflops = c.forwardFLOPs(cachedTokens: 0, newTokens: n) / best / 1e9
            let steps = breakdown ? KernelBreakdown(repeats: repeats).measure(weights, tokens: n) : nil
            prefills.append(.init(tokens: n, tokens_per_second: Double(n) / best, gflops: gflops,
                                  sgemm_gflops: ceiling, ratio_to_sgemm: gflops / ceiling,
                                  sgemm_peak_gflops: peak, ratio_to_sgemm_peak: gflops / peak,
                                  pass_ms_per_layer: best * 1000 / Double(c.layerCount), breakdown: steps))
        }
        // The compute ceiling of the incremental rooflines, and the one the report names: the fastest
        // shape seen at the prefill lengths or at 512 tokens (best of a few runs), whichever is faster,
        // so a run of only short prefills does not lower it.
        let sgemmPeak = max(prefills.map(\.sgemm_peak_gflops).max() ?? 0,
                            (0 ..< max(repeats, 3)).map { _ in sgemmCeiling(c, tokens: min(512, c.contextLength)).peak }.max()!)
        let probe = readProbe()
        let incrementalReports = measureIncremental(weights, model: model, cache: cache, newTokens: incremental,
                                                    cachedTokens: cachedTokens, readGBps: readGBps, sgemmPeak: sgemmPeak,
                                                    probe: probe, computeProbe: ComputeProbe(c))
        // Decode after a short prompt, so weights (not the cache) dominate the traffic: tokens/s
        // over a run of `decodeTokens`, the best of `repeats` runs.
        let prompt = Array(0 ..< min(16, c.contextLength - decodeTokens - 1)).map { $0 % c.vocabSize }
        func decodeSeconds(_ tokens: Int) -> Double {
            if cache.count + tokens >= c.contextLength { cache.truncate(to: prompt.count) }
            return seconds {
                for i in 0 ..< tokens { _ = try? model.forward([(i * 31) % c.vocabSize], cache: cache) }
            } / Double(tokens)
        }
        let perToken = (0 ..< repeats).map { _ in
            cache.truncate(to: 0)
            _ = try? model.forward(prompt, cache: cache)
            return decodeSeconds(decodeTokens)
        }.min()!
        let weightGBps = Double(c.decodeWeightBytes) / perToken / 1e9
        // Against the read ceiling, pair by pair: four reads of the probe, then four tokens, each
        // pair's ratio of like windows taken back to back, and the median of the pairs. A virtual
        // machine's memory speed can drift by a fifth within minutes; this keeps the ratio one of
        // neighbours measured alike, not of the run's best read against a long decode.
        cache.truncate(to: 0)
        _ = try? model.forward(prompt, cache: cache)
        let convertSeconds = c.weightPrecision == .f16 ? Double(c.decodeMatrixWeights) / (conversionGHalfs * 1e9) : 0
        let pairs = (0 ..< max(2 * repeats, 9)).map { _ in
            let read = Double(Self.streamBytes) / readSeconds(probe) / 1e9, token = decodeSeconds(4)
            let roofline = max(Double(c.decodeWeightBytes) / (read * 1e9), convertSeconds)
            return (read: read, ratio: Double(c.decodeWeightBytes) / token / 1e9 / read, roofline: roofline / token)
        }
        return ModelReport(model: c.name, precision: c.weightPrecision.rawValue, parameters: c.parameterCount,
                           sgemm_gflops: sgemmPeak,
                           prefill: prefills, incremental: incrementalReports,
                           decode_tokens_per_second: 1 / perToken, decode_weight_gbps: weightGBps,
                           decode_ratio_to_sgemv: weightGBps / sgemvGBps, decode_read_gbps: Self.median(pairs.map(\.read)),
                           decode_ratio_to_read: Self.median(pairs.map(\.ratio)),
                           decode_ratio_to_roofline: Self.median(pairs.map(\.roofline)))
    }

    static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

    /// What every core can do at a moment, for pairing passes with the compute ceiling: the
    /// gate|up product of a 512-token prefill (`model`'s widest, usually its fastest sgemm shape)
    /// cut into one band per worker, each worker's band on one thread, all at once
    /// (``Kernels/bandedSGEMMRates(_:transposed:into:workers:)``), the workers' rates summed: the
    /// incremental passes' kernels balance their work between the threads, so a core in a slow
    /// spell costs them what it costs this sum. About 15 ms on two cores of 140 GFLOP/s each.
    struct ComputeProbe {
        let a: Matrix, b: Matrix, c: Matrix

        init(_ config: ModelConfig) {
            a = .zeros(rows: min(512, config.contextLength), cols: config.dim)
            b = .zeros(rows: 2 * config.hiddenDim, cols: config.dim)
            c = .zeros(rows: a.rows, cols: b.rows)
            LMRuntime.Kernels.fillUniform(a, seed: 4, scale: 1)
            LMRuntime.Kernels.fillUniform(b, seed: 5, scale: 1)
        }

        /// The workers' summed GFLOP/s, measured now.
        func gflops() -> Double { LMRuntime.Kernels.bandedSGEMMRates(a, transposed: b, into: c).reduce(0, +) / 1e9 }
    }

    /// `T` new tokens on top of `cachedTokens` cached ones, for each `T`: the pass a cache hit's
    /// time to first token is made of, against its roofline.
    func measureIncremental(_ weights: ModelWeights, model: Transformer, cache: DenseKVCache, newTokens: [Int],
                            cachedTokens: Int, readGBps: Double, sgemmPeak: Double, probe: Matrix,
                            computeProbe: ComputeProbe) -> [ModelReport.Incremental] {
        let c = weights.config
        let counts = newTokens.filter { cachedTokens + $0 <= c.contextLength }
        guard !counts.isEmpty else { return [] }
        cache.truncate(to: 0)
        _ = try? model.forward((0 ..< cachedTokens).map { ($0 * 7919 + 11) % c.vocabSize }, cache: cache)
        var computeBest = (0 ..< 3).map { _ in computeProbe.gflops() }.max()!
        let measured = counts.map { t in
            let tokens = (0 ..< t).map { ($0 * 104_729 + 3) % c.vocabSize }
            let best = (0 ..< max(repeats, 3)).map { _ in
                cache.truncate(to: cachedTokens)
                return seconds { _ = try? model.forward(tokens, cache: cache) }
            }.min()!
            // As for decode: against the read ceiling measured just before, pair by pair (the
            // run's best read, taken minutes earlier, moved these ratios by a fifth on a noisy
            // host); and the compute probe between the reads and the pass.
            let pairs = (0 ..< max(2 * repeats, 3)).map { _ in
                let read = Double(Self.streamBytes) / readSeconds(probe) / 1e9, compute = computeProbe.gflops()
                cache.truncate(to: cachedTokens)
                let pass = seconds { _ = try? model.forward(tokens, cache: cache) }
                return (read: read, compute: compute, pass: pass)
            }
            computeBest = max(computeBest, pairs.map(\.compute).max()!)
            let steps = breakdown ? KernelBreakdown(repeats: repeats).measure(weights, tokens: t, cachedTokens: cachedTokens) : nil
            return (t: t, best: best, pairs: pairs, steps: steps)
        }
        // The pairs' compute ceilings scale the run's sgemm ceiling by the probe against the best
        // probe of the whole section, known only once every pair has run.
        return measured.map { t, best, pairs, steps in
            let bytes = Double(c.decodeWeightBytes) + Double(2 * c.layerCount * c.kvDim * (cachedTokens + t) * 4)
            let flops = c.forwardFLOPs(cachedTokens: cachedTokens, newTokens: t)
            let roofline = max(bytes / (readGBps * 1e9), flops / (sgemmPeak * 1e9))
            let sgemm = pairs.map { sgemmPeak * $0.compute / computeBest }
            let readOnly = pairs.map { $0.pass / max(bytes / ($0.read * 1e9), flops / (sgemmPeak * 1e9)) }
            let both = zip(pairs, sgemm).map { pair, sgemm in pair.pass / max(bytes / (pair.read * 1e9), flops / (sgemm * 1e9)) }
            return .init(cached_tokens: cachedTokens, new_tokens: t, ms: best * 1000, bytes_streamed: bytes, gflop: flops / 1e9,
                         roofline_ms: roofline * 1000, ratio_to_roofline: best / roofline,
                         paired_read_gbps: Self.median(pairs.map(\.read)), paired_ratio_to_roofline: Self.median(readOnly),
                         paired_sgemm_gflops: Self.median(sgemm), paired_ceilings_ratio_to_roofline: Self.median(both),
                         breakdown: steps)
        }
    }
}

/// f16 weights against f32 weights of the same model, measured in the same run.
struct PrecisionComparison: Encodable {
    let model: String
    /// f16 decode tokens/s ÷ f32 decode tokens/s (each model's best run, minutes apart).
    let decode_speedup: Double
    /// The same in alternating windows of four tokens, f32 then f16 (the median of the pairs):
    /// both see the same memory speed, which can drift by a fifth between the two best runs.
    let decode_speedup_paired: Double
    /// The most the ceilings allow: f32's weight bytes ÷ read, over the larger of f16's weight
    /// bytes ÷ read and its halfs ÷ the conversion ceiling (the read ceiling: the mean of the two
    /// models' decode pairs).
    let decode_speedup_ceiling: Double
    /// The longest prefill both measured, and each one's ratio to the sgemm ceiling of its GEMMs.
    let prefill_tokens: Int
    let f16_prefill_ratio_to_sgemm: Double
    let f32_prefill_ratio_to_sgemm: Double
    let deviation: LogitDeviation

    init(f32: (ModelWeights, ModelReport), f16: (ModelWeights, ModelReport), tokens: Int, conversionGHalfs: Double) throws {
        model = f32.0.config.name
        decode_speedup = f16.1.decode_tokens_per_second / f32.1.decode_tokens_per_second
        decode_speedup_paired = Self.pairedSpeedup(f32: f32.0, f16: f16.0)
        let read = (f32.1.decode_read_gbps + f16.1.decode_read_gbps) / 2 * 1e9, half = f16.0.config
        decode_speedup_ceiling = Double(f32.0.config.decodeWeightBytes) / read
            / max(Double(half.decodeWeightBytes) / read, Double(half.decodeMatrixWeights) / (conversionGHalfs * 1e9))
        let longest = f32.1.prefill.indices.max { f32.1.prefill[$0].tokens < f32.1.prefill[$1].tokens }
        let at512 = f32.1.prefill.firstIndex { $0.tokens == 512 } ?? longest
        prefill_tokens = at512.map { f32.1.prefill[$0].tokens } ?? 0
        f32_prefill_ratio_to_sgemm = at512.map { f32.1.prefill[$0].ratio_to_sgemm } ?? 0
        f16_prefill_ratio_to_sgemm = at512.map { f16.1.prefill[$0].ratio_to_sgemm } ?? 0
        let c = f32.0.config
        let prompt = [Tokenizer.bos] + (1 ..< min(8, c.contextLength / 2)).map { ($0 * 7919 + 11) % c.vocabSize }
        deviation = try LogitDeviation.measure(Transformer(weights: f16.0), against: Transformer(weights: f32.0),
                                               prompt: prompt, tokens: tokens)
    }

    /// f32 decode time ÷ f16 decode time over windows of four tokens taken back to back, f32
    /// then f16, after a 16-token prompt each: the median of nine pairs.
    static func pairedSpeedup(f32: ModelWeights, f16: ModelWeights) -> Double {
        let c = f32.config, prompt = Array(0 ..< min(16, c.contextLength / 2)).map { $0 % c.vocabSize }
        let runs = [f32, f16].map { weights in
            let model = Transformer(weights: weights), cache = model.makeCache()
            return { (i: Int) -> Double in
                if i == 0 || cache.count + 4 >= c.contextLength { cache.truncate(to: 0); _ = try? model.forward(prompt, cache: cache) }
                return seconds { for t in 0 ..< 4 { _ = try? model.forward([(t * 31 + i) % c.vocabSize], cache: cache) } }
            }
        }
        return KernelProbe.median((0 ..< 9).map { i in runs[0](i) / runs[1](i) })
    }
}
