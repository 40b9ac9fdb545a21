import Foundation
import LMRuntime
import LMTestSupport
import Testing

/// Runs the built `kvbench` executable and checks what it prints.
struct KVBenchTests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static var executable: URL {
        let beside = Bundle.main.bundleURL.appendingPathComponent("kvbench")
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        return Fixtures.packageRoot.appendingPathComponent(".build/debug/kvbench")
    }

    static func run(_ arguments: [String]) throws -> Run {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = Fixtures.packageRoot
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                   stderr: String(decoding: stderr, as: UTF8.self))
    }

    struct GenerateOutput: Decodable {
        let prompt_token_ids: [Int]
        let generated_token_ids: [Int]
        let text: String
    }

    @Test func generate_jsonCarriesTokenIdsAndText() throws {
        let run = try Self.run(["generate", "--model", "tiny", "--prompt", "Suggest a recipe using", "--max-tokens", "7", "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let output = try JSONDecoder().decode(GenerateOutput.self, from: Data(run.stdout.utf8))
        let tokenizer = Fixtures.bundledTokenizer
        #expect(output.prompt_token_ids == tokenizer.encode("Suggest a recipe using"))
        #expect(output.generated_token_ids.count <= 7)
        #expect(output.text == tokenizer.decode(output.prompt_token_ids + output.generated_token_ids))
    }

    /// `convert --type f16` refuses a model with a weight beyond the half range, naming the tensor,
    /// and writes nothing; the same model converts to f32.
    @Test func convert_refusesHalfsThatWouldBeInfinite() throws {
        let tokenizer = Fixtures.bundledTokenizer
        let weights = try Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: tokenizer.vocabSize)).unpackedCopy()
        weights.layers[1].down.floatMatrix()[2, 3] = 1e6   // plain float32 rows: a view
        let dir = Fixtures.temporaryFile("kvbench-convert-range")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("big.gguf"), half = dir.appendingPathComponent("half.gguf")
        try weights.ggufData(tokenizer: tokenizer).write(to: source)
        let refused = try Self.run(["convert", "--gguf", source.path, "--output", half.path, "--type", "f16"])
        #expect(refused.status != 0 && refused.stderr.contains("blk.1.ffn_down.weight") && refused.stderr.contains("keep this model in f32"),
                "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: half.path))
        weights.layers[1].wq.floatMatrix()[0, 0] = 9e6   // beyond Q8_0's scales as well
        try weights.ggufData(tokenizer: tokenizer).write(to: source)
        let q8 = dir.appendingPathComponent("q8.gguf")
        let refusedQ8 = try Self.run(["convert", "--gguf", source.path, "--output", q8.path, "--type", "q8_0"])
        #expect(refusedQ8.status != 0 && refusedQ8.stderr.contains("Q8_0 block of blk.1.attn_q.weight"), "\(refusedQ8.stderr)")
        #expect(!FileManager.default.fileExists(atPath: q8.path))
        let plain = try Self.run(["convert", "--gguf", source.path, "--output", dir.appendingPathComponent("f32.gguf").path])
        #expect(plain.status == 0, "\(plain.stderr)")
    }

    @Test func generate_plainPrintsPromptThenContinuation() throws {
        let run = try Self.run(["generate", "--model", "tiny", "--prompt", "Hello coach", "--max-tokens", "3"])
        #expect(run.status == 0 && run.stdout.hasPrefix("Hello coach"), "\(run.stdout)")
    }

    @Test(.enabled(if: Fixtures.sharedModel("stories260K.bin") != nil, "skipped: ../shared/models/stories260K.bin is absent"))
    func generate_checkpointReproducesLlama2cGreedyTokens() throws {
        let model = try #require(Fixtures.sharedModel("stories260K.bin")), tok = try #require(Fixtures.sharedModel("tok512.bin"))
        let run = try Self.run(["generate", "--checkpoint", model.path, "--tokenizer", tok.path,
                                "--prompt", "Once upon a time", "--max-tokens", "12", "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let output = try JSONDecoder().decode(GenerateOutput.self, from: Data(run.stdout.utf8))
        #expect(output.prompt_token_ids == [1, 403, 407, 261, 378])
        #expect(output.generated_token_ids == [432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338])
    }

    @Test func guided_jsonReportsMaskTimesAndValidity() throws {
        let run = try Self.run(["guided", "--model", "tiny", "--responses", "2", "--max-tokens", "160", "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        #expect(json["all_valid"] as? Bool == true)
        #expect(json["vocab_size"] as? Int == Fixtures.bundledTokenizer.vocabSize)
        #expect(json["tokens"] as? Int ?? 0 > 0)
        for key in ["mask_mean_us", "mask_p50_us", "mask_p99_us", "decode_ms_per_token", "mask_share_of_decode"] {
            #expect((json[key] as? Double ?? 0) > 0, "\(key)")
        }
        let bad = try Self.run(["guided", "--responses", "1"])
        #expect(bad.status != 0 && bad.stderr.contains("--responses"))
    }

    @Test func kernels_jsonReportsCeilingsAndRatios() throws {
        let run = try Self.run(["kernels", "--model", "tiny", "--prefill", "8", "16", "--repeats", "1",
                                "--incremental", "1", "4", "--cached", "100", "--decode-tokens", "2", "--breakdown",
                                "--deviation-tokens", "12", "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        #expect((json["sgemv_gbps"] as? Double ?? 0) > 0 && (json["read_gbps"] as? Double ?? 0) > 0)
        #expect([1, 2, 4, 8].contains(json["read_streams_per_thread"] as? Int ?? 0))
        #expect((json["conversion_ghalfs"] as? Double ?? 0) > 0)
        // The kernel choices that shape the figures are reported as the runtime made them.
        #expect(json["pair_tiles"] as? Bool == Kernels.pairTilesBeyondTwelveRows)
        #expect(json["attention_value_chunks"] as? Bool == Kernels.attentionValueChunks)
        #expect(json["blocked_skinny_rows_f32"] as? Int == Kernels.blockedSkinnyRows.f32
            && json["blocked_skinny_rows_f16"] as? Int == Kernels.blockedSkinnyRows.f16)
        let models = try #require(json["models"] as? [[String: Any]])
        // Without --precision: the model in f32, then in f16, then the two compared.
        #expect(models.map { $0["model"] as? String } == ["tiny", "tiny"])
        #expect(models.map { $0["precision"] as? String } == ["f32", "f16"])
        let comparison = try #require((json["precision_comparisons"] as? [[String: Any]])?.first)
        #expect((comparison["decode_speedup"] as? Double ?? 0) > 0 && comparison["prefill_tokens"] as? Int == 16)
        // f16 streams half of f32's matrix bytes (norms stay f32), so the ceilings allow at most about 2×.
        #expect((comparison["decode_speedup_ceiling"] as? Double).map { $0 > 0 && $0 <= 2 } == true)
        #expect((comparison["decode_speedup_paired"] as? Double ?? 0) > 0)
        let deviation = try #require(comparison["deviation"] as? [String: Any])
        #expect(deviation["positions"] as? Int == 12 && (deviation["maxAbsoluteError"] as? Double ?? 0) > 0)
        #expect((deviation["argmaxAgreement"] as? Double).map { $0 > 0 && $0 <= 1 } == true)
        let prefill = try #require(models[0]["prefill"] as? [[String: Any]])
        #expect(prefill.map { $0["tokens"] as? Int } == [8, 16])
        for row in prefill {
            for key in ["tokens_per_second", "gflops", "sgemm_gflops", "ratio_to_sgemm", "pass_ms_per_layer"] {
                #expect((row[key] as? Double ?? 0) > 0, "\(key)")
            }
            // --breakdown: every step of a layer, in pass order, each timed.
            let steps = try #require(row["breakdown"] as? [[String: Any]])
            #expect(steps.map { $0["kernel"] as? String } == ["attention norm", "Q|K|V", "RoPE", "attention", "O + residual",
                                                              "FFN norm", "gate|up", "SwiGLU", "down + residual"])
            #expect(steps.allSatisfy { ($0["ms_per_layer"] as? Double ?? 0) > 0 && ($0["ms_per_layer_in_sequence"] as? Double ?? 0) > 0 })
        }
        // The incremental section: each new-token count on the cached prefix, against its roofline.
        let incremental = try #require(models[0]["incremental"] as? [[String: Any]])
        #expect(incremental.map { $0["new_tokens"] as? Int } == [1, 4] && incremental.allSatisfy { $0["cached_tokens"] as? Int == 100 })
        for row in incremental {
            for key in ["ms", "bytes_streamed", "gflop", "roofline_ms", "ratio_to_roofline", "paired_read_gbps", "paired_ratio_to_roofline",
                        "paired_sgemm_gflops", "paired_ceilings_ratio_to_roofline"] {
                #expect((row[key] as? Double ?? 0) > 0, "\(key)")
            }
            #expect((row["breakdown"] as? [[String: Any]])?.count == 9)
            // The roofline is made of the figures the report names: the run's read ceiling and the model's sgemm.
            let bytes = row["bytes_streamed"] as? Double ?? 0, gflop = row["gflop"] as? Double ?? 0
            let read = json["read_gbps"] as? Double ?? 0, sgemm = models[0]["sgemm_gflops"] as? Double ?? 0
            let expected = 1000 * max(bytes / (read * 1e9), gflop / sgemm)
            #expect(abs((row["roofline_ms"] as? Double ?? 0) - expected) <= 1e-9 * expected, "roofline of \(row["new_tokens"] ?? "?") new tokens")
            // The paired compute ceiling scales the run's by a probe against its best: never above it.
            #expect((row["paired_sgemm_gflops"] as? Double ?? .infinity) <= sgemm * (1 + 1e-12))
        }
        for key in ["decode_tokens_per_second", "decode_weight_gbps", "decode_ratio_to_sgemv", "decode_read_gbps", "decode_ratio_to_read",
                    "decode_ratio_to_roofline", "sgemm_gflops"] {
            #expect((models[0][key] as? Double ?? 0) > 0, "\(key)")
        }
        // Decode's roofline: the read alone for f32; for f16 the conversion ceiling can only raise it.
        let ratios = models.map { ($0["decode_ratio_to_read"] as? Double ?? 0, $0["decode_ratio_to_roofline"] as? Double ?? 0) }
        #expect(abs(ratios[0].0 - ratios[0].1) <= 1e-9 * ratios[0].0 && ratios[1].1 >= ratios[1].0 * (1 - 1e-9))
        #expect(run.stderr.contains("measuring"))   // progress goes to stderr, never into the JSON
    }

    @Test func kernels_precisionMeasuresThatPrecisionOnly() throws {
        let run = try Self.run(["kernels", "--model", "tiny", "--precision", "f16", "--prefill", "8", "--repeats", "1",
                                "--incremental", "4", "--cached", "20", "--decode-tokens", "2"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("tiny, f16 weights") && !run.stdout.contains("f32 weights"))
        #expect(!run.stdout.contains("against f32"))
    }

    @Test func adapter_writesAnAdapterThatGenerateMerges() throws {
        let dir = Fixtures.temporaryFile("adapter")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("demo.gguf")
        let run = try Self.run(["adapter", "--model", "tiny", "--rank", "4", "--projections", "attn_v", "ffn_down",
                                "--name", "demo", "--metadata", #"{"task":"demo"}"#, "--output", file.path])
        #expect(run.status == 0, "\(run.stderr)")
        let adapter = try LowRankAdapter(contentsOf: file)
        let tiny = try ModelCatalog.bundled.weights(for: ModelCatalog.bundled.config(named: "tiny"))
        #expect(adapter.rank == 4 && adapter.name == "demo" && adapter.baseFingerprint == ModelFingerprint(tiny))
        #expect(Set(adapter.factors.keys.map(\.projection)) == [.value, .down] && adapter.factors.count == 2 * tiny.config.layerCount)
        #expect(run.stdout.contains("fmadapter-demo-\(adapter.baseFingerprint.description.prefix(8)).gguf"))

        let prompt = ["generate", "--model", "tiny", "--prompt", "Suggest a recipe using", "--max-tokens", "12", "--json"]
        let plain = try Self.run(prompt), adapted = try Self.run(prompt + ["--adapter", file.path])
        #expect(plain.status == 0 && adapted.status == 0, "\(adapted.stderr)")
        let a = try JSONDecoder().decode(GenerateOutput.self, from: Data(plain.stdout.utf8))
        let b = try JSONDecoder().decode(GenerateOutput.self, from: Data(adapted.stdout.utf8))
        #expect(a.prompt_token_ids == b.prompt_token_ids && a.generated_token_ids != b.generated_token_ids)
        let foreign = try Self.run(["generate", "--model", "small", "--adapter", file.path, "--prompt", "x"])
        #expect(foreign.status != 0 && foreign.stderr.contains("adapter 'demo' was made for the base weights"))
    }

    @Test func trainTokenizer_writesALoadableVocabulary() throws {
        let dir = Fixtures.temporaryFile("corpus")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "the cat sat on the mat, the cat sat on the hat".write(to: dir.appendingPathComponent("a.txt"), atomically: true, encoding: .utf8)
        let output = dir.appendingPathComponent("tok.bin")
        let run = try Self.run(["train-tokenizer", "--corpus", dir.path, "--vocab-size", "300", "--output", output.path])
        #expect(run.status == 0, "\(run.stderr)")
        let tokenizer = try Tokenizer(contentsOf: output)
        #expect(tokenizer.vocabSize <= 300 && tokenizer.encode("the cat", bos: false).count == 2)
    }

    @Test(arguments: [
        (["generate", "--model", "tiny", "--prompt", "x", "--temperature", "-1"], "--temperature"),
        (["generate", "--model", "huge", "--prompt", "x"], "available: base, small, tiny"),
        (["generate", "--model", "tiny", "--checkpoint", "m.bin", "--prompt", "x"], "Use one of --model, --checkpoint, not several"),
        (["generate", "--gguf", "a.gguf", "--checkpoint", "m.bin", "--prompt", "x"], "Use one of --checkpoint, --gguf, not several"),
        (["generate", "--gguf", "/nonexistent.gguf", "--prompt", "x"], "cannot read /nonexistent.gguf"),
        (["generate", "--model", "tiny", "--context", "64", "--prompt", "x"], "--context goes with --gguf"),
        (["generate", "--gguf", "a.gguf", "--context", "0", "--prompt", "x"], "--context must be at least 1, got 0"),
        (["responses", "--seed", "3"], "kvbench responses does not use --seed"),
        (["kernels", "--seed", "3"], "kvbench kernels does not use --seed"),
        (["kernels", "--format", "csv"], "kvbench kernels writes --format table, json; not csv"),
        (["generate", "--prompt", "x", "--format", "markdown"], "kvbench generate writes --format text, json; not markdown"),
        (["scenarios", "--json", "--format", "csv"], "--json contradicts --format csv"),
        (["scenarios", "--format", "json", "--timeline", "stable-append"], "--timeline prints a text chart"),
        (["scenarios", "--quick", "--gguf", "x.gguf"], "--quick picks the model itself"),
        (["convert", "--model", "tiny", "--output", "x.txt"], "--output must end in .gguf or .bin"),
        (["convert", "--model", "tiny", "--output", "x.bin", "--type", "f16"], "--type applies to a .gguf output"),
        (["convert", "--model", "tiny", "--output", "x.gguf", "--type", "q4"], "--type must be f32, f16 or q8_0"),
        (["convert", "--model", "tiny", "--output", "x.gguf", "--tokenizer-output", "t.bin"], "--tokenizer-output goes with a .bin output"),
        (["convert", "--model", "tiny", "--output", "x.gguf", "--threads", "2"], "kvbench convert does not use --threads"),
        (["convert", "--checkpoint", "m.bin", "--output", "x.gguf"], "a GGUF carries its vocabulary"),
        (["generate", "--checkpoint", "/nonexistent.bin", "--prompt", "x"], "cannot read /nonexistent.bin"),
        (["kernels", "--prefill", "0"], "--prefill"),
        (["train-tokenizer", "--vocab-size", "10"], "--vocab-size"),
        (["adapter", "--model", "tiny", "--output", "a.bin"], "--output must end in .gguf"),
        (["adapter", "--model", "tiny", "--output", "a.gguf", "--projections", "attn_qkv"], "'attn_qkv' is not one of attn_q"),
        (["adapter", "--model", "tiny", "--output", "a.gguf", "--name", "my adapter"], "--name must be letters, digits and underscores"),
        (["adapter", "--model", "tiny", "--output", "a.gguf", "--metadata", "[1]"], "--metadata must be a JSON object"),
        (["adapter", "--model", "tiny", "--output", "a.gguf", "--precision", "f16"], "kvbench adapter does not use --precision"),
        (["generate", "--model", "tiny", "--adapter", "/nonexistent.gguf", "--prompt", "x"], "cannot read /nonexistent.gguf"),
    ])
    func badArguments_failWithAMessageNamingTheProblem(arguments: [String], message: String) throws {
        let run = try Self.run(arguments)
        #expect(run.status != 0)
        #expect(run.stderr.contains(message), "\(run.stderr)")
    }
}

/// The scenarios command's output formats agree with each other.
struct ScenarioOutputTests {
    @Test func json_parsesAndMatchesTheTableAndCSV() throws {
        let common = ["scenarios", "--model", "tiny", "--turns", "2", "--response-tokens", "4",
                      "--scenario", "stable-append", "--scenario", "changing-top"]
        let json = try KVBenchTests.run(common + ["--format", "json"])
        #expect(json.status == 0, "\(json.stderr)")
        let records = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(records.count == 4)
        for key in ["scenario", "turn", "input_tokens", "cached_tokens", "output_tokens", "prefill_ms", "ttft_ms"] {
            #expect(records.allSatisfy { $0[key] != nil }, "\(key)")
        }
        let table = try KVBenchTests.run(common)
        #expect(table.status == 0)
        for name in ["stable-append", "changing-top"] {
            let mine = records.filter { $0["scenario"] as? String == name }
            let input = mine.map { $0["input_tokens"] as! Int }.reduce(0, +)
            let cached = mine.map { $0["cached_tokens"] as! Int }.reduce(0, +)
            let row = try #require(table.stdout.split(separator: "\n").first { $0.contains(". \(name) ") })
            let cells = row.split(separator: " ").map(String.init)
            #expect(cells[2] == "2" && cells[3] == "\(input)" && cells[4] == "\(cached)", "\(row)")
        }
        let csv = try KVBenchTests.run(common + ["--format", "csv"])
        let lines = csv.stdout.split(separator: "\n")
        #expect(lines.count == 5 && lines[0].hasPrefix("scenario,turn,input_tokens,cached_tokens"))
        #expect(table.stderr.contains("[1/2] stable-append"))   // progress on stderr
    }

    @Test func timelineAndSVG_areWritten() throws {
        let svg = Fixtures.temporaryFile("chart.svg")
        defer { try? FileManager.default.removeItem(at: svg) }
        let run = try KVBenchTests.run(["scenarios", "--model", "tiny", "--turns", "3", "--response-tokens", "3",
                                        "--scenario", "changing-top", "--timeline", "changing-top", "--svg", svg.path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("turn  2") && run.stdout.contains("█") && run.stdout.contains("✗ at"))
        let chart = try String(contentsOf: svg, encoding: .utf8)
        #expect(chart.hasPrefix("<svg") && chart.contains("<polyline") && chart.hasSuffix("</svg>"))
    }

    @Test func list_namesEveryScenario() throws {
        let run = try KVBenchTests.run(["scenarios", "--list"])
        #expect(run.status == 0)
        for name in ["stable-append", "changing-top", "conditional-first", "tool-added-midway", "strip-debug",
                     "consolidate-when-full", "first-turn-prewarm-prefix", "restore-prewarm", "switch-every-turn"] {
            #expect(run.stdout.contains(name))
        }
        let bad = try KVBenchTests.run(["scenarios", "--scenario", "nope"])
        #expect(bad.status != 0 && bad.stderr.contains("unknown scenario 'nope'"))
    }
}

struct ResponsesCommandTests {
    @Test func responses_jsonShowsGenerationsAvoided() throws {
        let run = try KVBenchTests.run(["responses", "--model", "tiny", "--opens", "6", "--change-every", "3", "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let outcomes = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: Any]])
        let byName = Dictionary(uniqueKeysWithValues: outcomes.map { ($0["strategy"] as! String, $0) })
        #expect(byName["no-cache"]?["generations"] as? Int == 6)
        // The widget's invalidations of its own entries, landing while each generation runs, do
        // not keep the app's summaries from being stored.
        for name in ["cache-else-generate", "disk-after-restart", "shared-with-widget"] {
            #expect(byName[name]?["generations"] as? Int == 2, "\(name)")   // one per data version
            #expect(byName[name]?["avoided"] as? Int == 4, "\(name)")
        }
        #expect(byName["disk-after-restart"]?["diskMs"] != nil)
        // Stale-while-revalidate refreshes on every open but shows the cached summary first.
        #expect(byName["cache-then-generate"]?["generations"] as? Int == 6)
        #expect(byName["cache-then-generate"]?["memoryMs"] != nil)
    }
}
