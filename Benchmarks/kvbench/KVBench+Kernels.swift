import ArgumentParser
import Foundation
import LMRuntime

extension KVBench {
    /// `kvbench kernels`: the machine's BLAS ceilings and how close the transformer gets to them.
    struct Kernels: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure sgemm/sgemv ceilings and each model's prefill and decode throughput against them.")

        @OptionGroup var options: ModelOptions

        @Option(name: .long, parsing: .upToNextOption,
                help: "Prefill lengths to measure (those beyond a model's context are skipped).")
        var prefill: [Int] = [128, 512, 2048]

        @Option(name: .long, parsing: .upToNextOption,
                help: "New-token counts for the incremental-prefill section (the pass of a cache hit).")
        var incremental: [Int] = [1, 4, 8, 16, 32, 64]

        @Option(name: .long, help: "Cached tokens the incremental passes run on top of.")
        var cached: Int = 1000

        @Option(name: .long, help: "Tokens to decode when measuring decode speed.")
        var decodeTokens: Int = 32

        @Option(name: .long, help: "Repetitions per measurement; the best is reported.")
        var repeats: Int = 5

        @Option(name: .long, help: "Greedy tokens over which f16 logits are compared with f32 ones (without --precision).")
        var deviationTokens: Int = 256

        @Flag(name: .long, help: "Also time each step of a layer alone at every prefill length.")
        var breakdown = false

        @OptionGroup var output: OutputOptions

        static let formats: [OutputFormat] = [.table, .json]

        func validate() throws {
            try options.refuse([.seed], in: "kernels")   // inputs are fixed so runs compare
            _ = try output.resolved(Self.formats, in: "kernels")
            if prefill.isEmpty || prefill.contains(where: { $0 < 1 }) {
                throw ValidationError("--prefill needs positive token counts.")
            }
            if decodeTokens < 1 { throw ValidationError("--decode-tokens must be at least 1.") }
            if incremental.contains(where: { $0 < 1 }) { throw ValidationError("--incremental needs positive token counts.") }
            if cached < 1 { throw ValidationError("--cached must be at least 1, got \(cached).") }
            if repeats < 1 { throw ValidationError("--repeats must be at least 1.") }
            if deviationTokens < 1 { throw ValidationError("--deviation-tokens must be at least 1.") }
        }

        func run() async throws {
            options.configureThreads()
            // Without --precision each model runs in float32 and in half, and the two are compared.
            let precisions = options.precision.map { [$0] } ?? WeightPrecision.allCases
            var models: [ModelWeights] = []
            let format = try output.resolved(Self.formats, in: "kernels")
            if options.model != nil || options.namesAFile {
                models = [try options.loadWeights(fallback: "base")]
            } else {
                let catalog = ModelCatalog.bundled
                for name in catalog.names {
                    progress("loading \(name)…")
                    models.append(try catalog.weights(for: catalog.config(named: name)))
                }
            }
            var probe = KernelProbe(breakdown: breakdown, repeats: repeats)
            progress("measuring sgemv on \(KernelProbe.streamBytes >> 20) MiB of weights…")
            let sgemv = probe.sgemvGBps()
            progress("measuring the DRAM read ceiling…")
            let read = probe.readGBps()
            progress("measuring the half conversion ceiling…")
            let conversion = probe.conversionGHalfs()
            var reports: [ModelReport] = [], comparisons: [PrecisionComparison] = []
            for loaded in models {
                var pair: [(ModelWeights, ModelReport)] = []
                for precision in precisions {
                    let weights = try loaded.converted(to: precision)
                    progress("measuring \(weights.config.name) (\(precision))…")
                    let report = probe.measure(weights, prefillLengths: prefill, incremental: incremental, cachedTokens: cached,
                                               decodeTokens: decodeTokens, sgemvGBps: sgemv, readGBps: read,
                                               conversionGHalfs: conversion)
                    reports.append(report)
                    pair.append((weights, report))
                }
                if pair.count == 2 {
                    progress("comparing \(loaded.config.name) f16 with f32 over \(deviationTokens) greedy tokens…")
                    comparisons.append(try PrecisionComparison(f32: pair[0], f16: pair[1], tokens: deviationTokens,
                                                               conversionGHalfs: conversion))
                }
            }
            let report = KernelReport(blas_core_type: LMRuntime.Kernels.blasCoreType,
                                      blas_core_type_replaced: LMRuntime.Kernels.blasCoreTypeReplaced, skinny_kernels: LMRuntime.Kernels.skinnyKernels,
                                      prefetch_level: LMRuntime.Kernels.prefetchLevel,
                                      decode_streams: LMRuntime.Kernels.decodeStreams,
                                      pair_tiles: LMRuntime.Kernels.pairTilesBeyondTwelveRows,
                                      attention_value_chunks: LMRuntime.Kernels.attentionValueChunks,
                                      blocked_skinny_rows_f32: LMRuntime.Kernels.blockedSkinnyRows.f32,
                                      blocked_skinny_rows_f16: LMRuntime.Kernels.blockedSkinnyRows.f16, threads: LMRuntime.Kernels.threadCount,
                                      read_gbps: read, read_streams_per_thread: probe.readStreams, sgemv_gbps: sgemv, conversion_ghalfs: conversion, models: reports, precision_comparisons: comparisons)
            print(format == .json ? try jsonText(report) : report.table)
        }
    }
}
