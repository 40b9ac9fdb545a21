import Foundation
import LMRuntime
import LMSession
import LMTestSupport
import ResponseCache

/// The parsers and file formats the package reads, each behind one entry point that takes any
/// bytes. An entry point may reject its input with an error (that is the point); it must never
/// crash, hang or allocate without bound. `kvfuzz` feeds them libFuzzer's inputs, and the test
/// suite replays the committed corpora and every saved crash through the same entry points.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// A llama2.c checkpoint file (header, then tensors); a loadable one converts to GGUF exactly,
    /// and its f16 and Q8_0 exports keep the range check's promise.
    case checkpoint
    /// A llama2.c `tokenizer.bin`; a loaded one encodes texts (which must give llama2.c's tokens) and decodes them.
    case tokenizer
    /// A model config (JSON), validated and costed.
    case config
    /// A saved transcript (JSON); a decoded one is rehydrated and answered on `tiny`.
    case transcript
    /// A response-cache entry file, read by a cache on its directory.
    case responseCacheEntry = "response-cache-entry"
    /// A response-cache directory's invalidation journal, read by a lookup and at a generation's
    /// end, appended to or replaced by an invalidation.
    case invalidationJournal = "invalidation-journal"
    /// A prefix-store file, restored by a store on its directory.
    case prefixStoreFile = "prefix-store-file"
    /// A GGUF model file: header, metadata, tensor directory, vocabulary; a loadable model runs a
    /// step, and its f16 and Q8_0 exports keep the range check's promise.
    case gguf
    /// `GeneratedContent` JSON, complete and as a stream's partial text; serialising is checked to be stable.
    case generatedContent = "generated-content"
    /// A generation schema as JSON Schema: decoded, re-encoded, and used to guide a response on `tiny`.
    case generationSchema = "generation-schema"
    /// A LoRA adapter (GGUF): its f16 and Q8_0 exports keep the range check's promise; one made
    /// for `tiny` is merged into its weights, checked against the merge's definition, and run a step.
    case loraAdapter = "lora-adapter"
    /// Not a file: a program of prefix-store operations (publish, restore, pin, unpin, clear) on
    /// prefixes that share starts, in a store small enough to evict and refuse. After every
    /// operation the store's invariants must hold, and every restore must give a fresh prefill's rows.
    case prefixStoreOperations = "prefix-store-operations"
    /// Not a file: a program of response-cache operations (requests under every policy, failing
    /// or not, invalidations, clock steps, relaunches, sweeps, files damaged in place) on one
    /// cache in memory or two sharing a directory. Every answer, the number of generations and the directory's files must
    /// be what a model of the cache's promises says.
    case responseCacheOperations = "response-cache-operations"

    /// Not a file: any text, encoded by a byte-level BPE vocabulary under each of its four
    /// pre-tokenizers. Its words must be the ones ICU's regular-expression engine finds with the
    /// model's expression, its ids must spell it back and hold no control token.
    case byteLevelText = "byte-level-text"

    /// Runs one input.
    public func run(_ data: Data) {
        switch self {
        case .checkpoint: Self.checkpoint(data)
        case .tokenizer: Self.tokenizer(data)
        case .config: Self.config(data)
        case .transcript: Self.transcript(data)
        case .responseCacheEntry: Self.responseCacheEntry(data)
        case .invalidationJournal: Self.invalidationJournal(data)
        case .prefixStoreFile: Self.prefixStoreFile(data)
        case .gguf: Self.gguf(data)
        case .generatedContent: Self.generatedContent(data)
        case .generationSchema: Self.generationSchema(data)
        case .loraAdapter: Self.loraAdapter(data)
        case .prefixStoreOperations: Self.prefixStoreOperations(data)
        case .responseCacheOperations: Self.responseCacheOperations(data)
        case .byteLevelText: Self.byteLevelTexts(data)
        }
    }

    /// Inputs may claim any size; running what they describe is capped here.
    static let memoryLimit = 256 << 20

    /// A scratch folder of this process's own, removed when the process exits normally.
    static let scratch: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("kvfuzz-\(getpid())")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: FuzzTarget.scratch) }
        return url
    }()

    static func checkpoint(_ data: Data) {
        guard let weights = try? ModelWeights.checkpoint(data: data, path: "fuzz.bin", memoryLimit: memoryLimit),
              weights.config.parameterCount <= 1 << 16 else { return }
        // Converted to GGUF (as `kvbench convert` does) and read back, a small model computes the
        // same logits, bit for bit (NaNs included: the weights are the fuzzer's).
        let converted = try? ModelWeights.gguf(data: weights.ggufData(), memoryLimit: memoryLimit)
        precondition(converted != nil, "a loaded checkpoint does not read back from its GGUF")
        func logits(_ w: ModelWeights) -> [UInt32]? {
            let model = Transformer(weights: w)
            return (try? model.forward([0], cache: model.makeCache()))?.toArray().map(\.bitPattern)
        }
        precondition(logits(weights) == logits(converted!), "a checkpoint computes other logits after conversion to GGUF")
        checkExports(weights)
    }

    /// Exported as halfs or Q8_0 blocks anyway, whatever the range check says: when it passes,
    /// every finite weight reads back finite (for Q8_0, in blocks holding no infinity or NaN,
    /// which poisons its block); when it refuses, some finite weight reads back infinite or NaN.
    static func checkExports(_ weights: ModelWeights) {
        for type in [GGUFTensorType.f16, .q8_0] {
            let written = try? ModelWeights.gguf(data: weights.ggufData(tensorType: type), memoryLimit: memoryLimit)
            precondition(written != nil, "a loaded model does not read back from its \(type) GGUF")
            let pairs = zip(weights.ggufTensors(), written!.ggufTensors()).filter { !$0.0.vector }
                .map { ($0.0.matrix.floatMatrix(), $0.1.matrix.floatMatrix()) }
            checkExport(as: type, fits: (try? weights.checkRange(for: type)) != nil, pairs)
        }
    }

    /// ``checkExports(_:)`` for an adapter's factors. An adapter file holding an infinity or NaN
    /// does not load, so an export the check refuses may not read back at all.
    static func checkExports(_ adapter: LowRankAdapter) {
        for type in [GGUFTensorType.f16, .q8_0] {
            let fits = (try? adapter.checkRange(for: type)) != nil
            guard let written = try? LowRankAdapter(ggufData: adapter.ggufData(tensorType: type)) else {
                precondition(!fits, "an adapter's \(type) export does not read back after the range check passed")
                continue
            }
            let pairs = adapter.factors.flatMap { target, f in [(f.a, written.factors[target]!.a), (f.b, written.factors[target]!.b)] }
            checkExport(as: type, fits: fits, pairs)
        }
    }

    /// The range check's promise for one export, and that no infinity or NaN ever reads back
    /// finite: `pairs` are each matrix as it was and as it read back from `type`, and `fits` is
    /// what the check said.
    static func checkExport(as type: GGUFTensorType, fits: Bool, _ pairs: [(Matrix, Matrix)]) {
        let revived = pairs.contains { a, b in
            (0 ..< a.rows).contains { r in (0 ..< a.cols).contains { !a[r, $0].isFinite && b[r, $0].isFinite } }
        }
        precondition(!revived, "a \(type) export turned an infinity or NaN finite")
        if fits {
            precondition(!losesFiniteWeights(pairs, as: type, inFiniteBlocksOnly: true),
                         "\(type) export turned finite weights infinite after the range check passed")
        } else {
            precondition(losesFiniteWeights(pairs, as: type, inFiniteBlocksOnly: false),
                         "the range check refused weights that \(type) holds")
        }
    }

    /// Whether a finite weight of a matrix as it was (when `inFiniteBlocksOnly`, only one whose
    /// block of the encoding holds no infinity or NaN) is infinite or NaN as it read back.
    static func losesFiniteWeights(_ pairs: [(Matrix, Matrix)], as type: GGUFTensorType, inFiniteBlocksOnly: Bool) -> Bool {
        for (a, b) in pairs {
            let block = type.encoding(forRowLength: a.cols).blockSize
            for r in 0 ..< a.rows {
                for start in stride(from: 0, to: a.cols, by: block) {
                    let columns = start ..< start + block
                    if inFiniteBlocksOnly, !columns.allSatisfy({ a[r, $0].isFinite }) { continue }
                    if columns.contains(where: { a[r, $0].isFinite && !b[r, $0].isFinite }) { return true }
                }
            }
        }
        return false
    }

    static func tokenizer(_ data: Data) {
        guard let tokenizer = try? Tokenizer(serialized: data, vocabSize: nil, path: "fuzz.bin") else { return }
        // The oracle is llama2.c's merge loop as the tests transcribe it, on a fixed text, on the
        // vocabulary's first pieces run together, and on the input's last bytes.
        let pieces = tokenizer.pieces.prefix(24).reduce(into: [UInt8]()) { $0 += $1 }
        for text in ["Fuzzing: naïve café, 日本語 🙂 1234.", String(decoding: pieces, as: UTF8.self), String(decoding: data.suffix(48), as: UTF8.self)] {
            let ids = tokenizer.encode(text)
            precondition(ids == referenceEncode(text, with: tokenizer), "encode(\(Array(text.utf8))) is not llama2.c's loop's")
            _ = tokenizer.decode(ids)
        }
        _ = tokenizer.serialized()
    }

    static func config(_ data: Data) {
        guard let config = try? JSONDecoder().decode(ModelConfig.self, from: data), (try? config.validate()) != nil else { return }
        let saved = try? JSONEncoder().encode(config)
        precondition(saved.flatMap { try? JSONDecoder().decode(ModelConfig.self, from: $0) } == config, "a config does not survive saving")
        _ = config.resourceEstimate()
        _ = try? config.checkResources(limit: memoryLimit)
    }

    /// The bundled `tiny` model with sharing off, loaded once.
    static let tiny = SystemLanguageModel(named: "tiny", prefixStore: .memoryOnly(memoryByteLimit: 0))

    /// Random models on the test fixture's ChatML vocabulary with tool tags and its Llama 3.1 one:
    /// their calls are JSON in `<tool_call>` tags, or a response that is one JSON object.
    static let taggedTiny = fixtureModel(Fixtures.toolTagsVocabulary)
    static let llama3Tiny = fixtureModel(Fixtures.pythonTagVocabulary)
    /// And on the Mistral v3 layout fixture, whose calls are `[TOOL_CALLS] [{…}]`.
    static let mistralTiny = fixtureModel(Fixtures.mistralV3Vocabulary)

    static func fixtureModel(_ vocabulary: URL) -> SystemLanguageModel {
        let tokenizer = try! Tokenizer(ggufAt: vocabulary)
        let weights = Fixtures.tinyWeights(Fixtures.tinyConfig(vocabSize: tokenizer.vocabSize, contextLength: 512))
        return SystemLanguageModel(try! LoadedModel(weights: weights, tokenizer: tokenizer, prefixStore: .memoryOnly(memoryByteLimit: 0)))
    }

    static func transcript(_ data: Data) {
        guard let transcript = try? JSONDecoder().decode(Transcript.self, from: data) else { return }
        // Saving what was loaded and loading it again gives it back.
        let saved = try? JSONEncoder().encode(transcript)
        precondition(saved.flatMap { try? JSONDecoder().decode(Transcript.self, from: $0) } == transcript, "a transcript does not survive saving")
        let session = LanguageModelSession(model: tiny, transcript: transcript)
        let done = DispatchSemaphore(value: 0)
        Task {
            _ = try? await session.respond(to: "Go on.", options: GenerationOptions(maximumResponseTokens: 1))
            done.signal()
        }
        done.wait()
        // Answered or refused, the session keeps every entry it was given, in order (after the
        // instructions entry it puts first when the transcript has none).
        func isInstructions(_ entry: Transcript.Entry?) -> Bool { if case .instructions = entry { true } else { false } }
        let kept = session.transcript.entries.dropFirst(isInstructions(transcript.first) ? 0 : 1)
        precondition(Array(kept.prefix(transcript.count)) == transcript.entries, "the session lost or changed a loaded entry")
    }

    static func responseCacheEntry(_ data: Data) {
        let directory = scratch.appendingPathComponent("responses")
        let key = CacheKey(parts: ["fuzz"])
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        guard (try? data.write(to: directory.appendingPathComponent(key.digest + ".entry.json"))) != nil else { return }
        let cache = ResponseCache<String>(configuration: .init(directory: directory))
        let done = DispatchSemaphore(value: 0)
        let answer = Locked<CacheAnswer<String>?>(nil)
        Task {
            let found = try? await cache.value(for: key, policy: .cacheOnly) { "" }
            answer.withLock { $0 = found }
            done.signal()
        }
        done.wait()
        // A file that is a whole entry for the key answers with its value; any other is a miss,
        // and is removed.
        struct Entry: Decodable { var key: CacheKey; var created: Date; var value: String }
        let entry = (try? JSONDecoder().decode(Entry.self, from: data)).flatMap { $0.key.digest == key.digest ? $0 : nil }
        let file = directory.appendingPathComponent(key.digest + ".entry.json")
        let found = answer.withLock { $0 }
        if let entry {
            precondition(found?.origin == .disk && found?.value == entry.value, "a whole entry was not answered from disk")
        } else {
            precondition(found?.origin == CacheAnswer<String>.Origin.none, "a file that is no entry was answered")
            precondition(!FileManager.default.fileExists(atPath: file.path), "a file that is no entry was left")
        }
        try? FileManager.default.removeItem(at: file)
    }

    static func invalidationJournal(_ data: Data) {
        let directory = scratch.appendingPathComponent("journal")
        let key = CacheKey(parts: ["fuzz"], dataFingerprint: "rows", tags: ["fuzz"])
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let cache = ResponseCache<String>(configuration: .init(directory: directory))
        guard (try? data.write(to: directory.appendingPathComponent(".invalidations"))) != nil else { return }
        let done = DispatchSemaphore(value: 0)
        let answers = Locked<[CacheAnswer<String>?]>([])
        Task {
            let generated = try? await cache.value(for: key, policy: .generateIgnoringCache) { "fuzz" }   // reads it twice
            await cache.invalidate(tag: "fuzz")                                                           // appends or replaces
            let after = try? await cache.value(for: key, policy: .cacheOnly) { "" }                      // follows it
            answers.withLock { $0 = [generated, after] }
            done.signal()
        }
        done.wait()
        // Whatever the journal held, the generation answers, and after the invalidation nothing does.
        let (generated, after) = answers.withLock { ($0[0], $0[1]) }
        precondition(generated?.origin == .generated && generated?.value == "fuzz", "the generation did not answer")
        precondition(after?.origin == CacheAnswer<String>.Origin.none, "an invalidated entry was answered")
    }

    /// The model and tokens a prefix-store input is read for (the seed files were written for
    /// them): 300 tokens of 32-byte rows, so a valid file's blocks span whole pages and a
    /// restore maps them (the path a bad size check would turn into a SIGBUS).
    static let storeWeights = try? ModelWeights.synthetic(
        ModelConfig(name: "fuzz", dim: 16, hiddenDim: 32, layerCount: 2, headCount: 2, kvHeadCount: 1, vocabSize: 300,
                    contextLength: 512, weights: .synthetic(seed: 1)), seed: 1)
    /// ``storeTokens`` prefilled from scratch, the rows every restore is checked against; only read
    /// once made (lazily, once, by Swift's static initialisation), so sharing it is safe.
    nonisolated(unsafe) static let storeFresh: GrowingKVCache? = storeWeights.flatMap { weights in
        let cache = GrowingKVCache(layerCount: weights.config.layerCount, kvDim: weights.config.kvDim,
                                   capacity: weights.config.contextLength)
        return (try? Transformer(weights: weights).forward(storeTokens, cache: cache)).map { _ in cache }
    }
    /// The tokens the prefix-store seed files were written for (their key names the file).
    public static let storeTokens = (0 ..< 300).map { 1 + $0 % 250 }
    static let storeFingerprint = storeWeights.map(ModelFingerprint.init)
    static let storeFileName: String? = storeFingerprint.map { fingerprint in
        "\(PrefixKey.keys(fingerprint: fingerprint, tokens: storeTokens, at: [storeTokens.count])[0]).kvp"
    }

    static func prefixStoreFile(_ data: Data) { _ = restorePrefixStoreFile(data) }

    /// Restores ``storeTokens`` from `data` as their entry file, in `directory` (by default one
    /// shared by every call: the fuzzer runs inputs one at a time; concurrent callers pass their
    /// own): the tokens restored and the bytes of rows mapped from the file.
    public static func restorePrefixStoreFile(_ data: Data, in directory: URL? = nil) -> (tokens: Int, mappedBytes: Int) {
        guard let weights = storeWeights, let fingerprint = storeFingerprint, let name = storeFileName else { return (0, 0) }
        let directory = directory ?? scratch.appendingPathComponent("prefixes")
        let file = directory.appendingPathComponent(name)
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        guard (try? data.write(to: file)) != nil else { return (0, 0) }
        defer { try? FileManager.default.removeItem(at: file) }
        let c = weights.config
        let store = PrefixStore(fingerprint: fingerprint, layerCount: c.layerCount, kvDim: c.kvDim,
                                configuration: .persistent(in: directory))
        let cache = GrowingKVCache(layerCount: c.layerCount, kvDim: c.kvDim, capacity: c.contextLength)
        let restored = store.restore(into: cache, tokens: storeTokens + [1], boundaries: [storeTokens.count])
        // Whatever a file restores must be what a prefill computes: a file that passes the checks
        // but holds other rows would be a cache that answers wrongly.
        if let fresh = storeFresh { checkRows(cache, against: fresh) }
        return (restored.fromDisk, store.statistics.diskBytesMapped)
    }

    /// A valid entry file for ``storeTokens`` (the committed seed is one), written by a store.
    public static func prefixStoreSeed() throws -> Data {
        guard let weights = storeWeights else { throw CocoaError(.featureUnsupported) }
        let directory = scratch.appendingPathComponent("seed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = PrefixStore(weights: weights, configuration: .persistent(in: directory))
        let cache = GrowingKVCache(layerCount: weights.config.layerCount, kvDim: weights.config.kvDim,
                                   capacity: weights.config.contextLength)
        try Transformer(weights: weights).forward(storeTokens, cache: cache)
        store.publish(cache, boundaries: [storeTokens.count])
        store.flush()
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        guard names.count == 1 else { throw CocoaError(.fileNoSuchFile) }
        return try Data(contentsOf: directory.appendingPathComponent(names[0]))
    }

    /// A GGUF input runs under a tighter limit than the others: the seeds are 20 KB models, and
    /// mutated ones that ask for more are refused (that path is the one worth fuzzing), where
    /// zero-filling hundreds of megabytes per input would cut the run rate a hundredfold.
    static let ggufMemoryLimit = 16 << 20

    static func gguf(_ data: Data) {
        guard let file = try? GGUFFile(data: data) else { return }
        let tokenizer = try? Tokenizer(gguf: file)
        if let tokenizer {
            let text = "Fuzz: naïve 日本 🙂 it's 12345\n\t  x"
            if !tokenizer.isByteLevel {
                precondition(tokenizer.encode(text) == referenceEncode(text, with: tokenizer), "a GGUF vocabulary's encoding is not llama2.c's loop's")
            } else {   // byte-level BPE loses nothing: its tokens spell the text back
                precondition(tokenizer.decode(tokenizer.encode(text, bos: false)) == text, "a byte-level vocabulary does not spell its text back")
            }
        }
        guard let weights = try? ModelWeights.gguf(data: data, memoryLimit: ggufMemoryLimit),
              weights.config.parameterCount <= 1 << 16 else { return }
        let model = Transformer(weights: weights)
        let tokens = tokenizer?.encode("Fuzz") ?? [0]
        guard tokens.allSatisfy({ $0 < weights.config.vocabSize }) else { return }
        _ = try? model.forward(Array(tokens.prefix(weights.config.contextLength)), cache: model.makeCache())
        checkExports(weights)
    }

    static func loraAdapter(_ data: Data) {
        guard let adapter = try? LowRankAdapter(ggufData: data, path: "fuzz.gguf") else { return }
        if adapter.factors.values.reduce(0, { $0 + $1.a.rows * $1.a.cols + $1.b.rows * $1.b.cols }) <= 1 << 16 { checkExports(adapter) }
        guard let weights = try? tiny.loaded().weights else { return }
        let merged: ModelWeights
        do { merged = try weights.merging(adapter, memoryLimit: memoryLimit) } catch {
            // A factor refused for its range must have an update that leaves float32's.
            if case let .gguf(_, .invalidField(field, _, reason)) = error, reason.contains("float32's range") {
                let target = adapter.factors.keys.first { "tensor blk.\($0.layer).\($0.projection.rawValue).weight.lora_b" == field }
                guard let target, let f = adapter.factors[target] else { fatalError("refused an unknown tensor: \(field)") }
                let w = weights.layers[target.layer].weights(target.projection), scale = Double(adapter.scale)
                let beyond = (0 ..< w.rows).contains { i in
                    (0 ..< w.cols).contains { j in
                        let sum = (0 ..< adapter.rank).reduce(0.0) { $0 + Double(f.b[i, $1]) * Double(f.a[$1, j]) }
                        return abs(Double(w[i, j]) + scale * sum) >= Double(Float.greatestFiniteMagnitude)
                    }
                }
                precondition(beyond, "\(field) refused, yet every update is in float32's range")
            }
            return
        }
        // The merge is its definition: W + (alpha / rank) · B · A on every adapted projection
        // (computed here in double, elementwise), every other projection untouched, bit for bit,
        // and every merged weight finite.
        for (layer, (before, after)) in zip(weights.layers, merged.layers).enumerated() {
            for projection in LowRankAdapter.Projection.allCases {
                let w = before.weights(projection), m = after.weights(projection)
                guard let f = adapter.factors[.init(layer: layer, projection: projection)] else {
                    for i in 0 ..< w.rows {
                        for j in 0 ..< w.cols where m[i, j].bitPattern != w[i, j].bitPattern {
                            fatalError("layer \(layer) \(projection) [\(i), \(j)] changed without factors")
                        }
                    }
                    continue
                }
                for i in 0 ..< w.rows {
                    for j in 0 ..< w.cols {
                        var sum = 0.0, magnitude = 0.0
                        for k in 0 ..< adapter.rank {
                            let term = Double(f.b[i, k]) * Double(f.a[k, j])
                            sum += term
                            magnitude += abs(term)
                        }
                        let scale = Double(adapter.scale), expected = Double(w[i, j]) + scale * sum
                        let bound = abs(Double(w[i, j])) + abs(scale) * magnitude
                        precondition(m[i, j].isFinite && abs(Double(m[i, j]) - expected) <= 1e-5 * bound + 1e-30,
                                     "layer \(layer) \(projection) [\(i), \(j)]: merged \(m[i, j]), definition \(expected)")
                    }
                }
            }
        }
        let model = Transformer(weights: merged)
        _ = try? model.forward([1, 2, 3], cache: model.makeCache())
    }

    static func generatedContent(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        if let content = try? GeneratedContent(json: text) {
            // What the package writes it must read back, to the same text.
            guard let again = try? GeneratedContent(json: content.jsonString) else {
                fatalError("jsonString of parsed content does not parse: \(content.jsonString)")
            }
            precondition(again.jsonString == content.jsonString, "jsonString is not stable: \(content.jsonString)")
        }
        _ = try? GeneratedContent.partial(json: Array(data))
        // Against Foundation's reader, on valid UTF-8: whole JSON that one reads, the other reads
        // as the same complete value. Left out: escaped surrogate halves (the package reads a lone
        // one as U+FFFD, Foundation refuses it; JSON leaves that to the reader).
        guard String(validating: data, as: UTF8.self) != nil,
              text.range(of: #"\\u[dD][89a-fA-F]"#, options: .regularExpression) == nil else { return }
        let foundation = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        let ours = try? GeneratedContent(wholeJSON: text)
        switch (ours, foundation) {
        case let (ours?, foundation?):
            if let difference = difference(ours, foundation) { fatalError("Foundation reads other JSON: \(difference) in \(text)") }
            // What a stream shows: every prefix of whole JSON reads as a partial value (nothing
            // before the value starts), and the whole text as the value itself.
            guard data.count <= 512 else { break }
            let bytes = Array(data)
            for end in 0 ... bytes.count {
                do {
                    let part = try GeneratedContent.partial(json: Array(bytes[..<end]))
                    if end == bytes.count {
                        let growing = if case .number = ours.kind { true } else { false }   // a number at the end may go on
                        precondition(part?.jsonString == ours.jsonString && (growing || part?.isComplete == true),
                                     "the whole text reads otherwise as a stream's last part")
                    }
                } catch { fatalError("a prefix of whole JSON is refused as a partial value: \(error) after \(end) bytes of \(text)") }
            }
        case (nil, _?):
            // Foundation also takes a trailing comma, a byte-order mark and NUL bytes after the
            // value, which JSON does not allow.
            let lenient = text.hasPrefix("\u{FEFF}") || text.contains("\0")
                || text.range(of: #",[ \t\r\n]*[\]}]"#, options: .regularExpression) != nil
            if !lenient { fatalError("Foundation reads JSON the package refuses: \(text)") }
        case (_?, nil): fatalError("the package reads whole JSON Foundation refuses: \(text)")
        case (nil, nil): break
        }
    }

    /// Where `content` and a value `JSONSerialization` read differ, or nil.
    private static func difference(_ content: GeneratedContent, _ value: Any, path: String = "$") -> String? {
        switch content.kind {
        case .null: return value is NSNull ? nil : "\(path): null against \(value)"
        case let .bool(b): return (value as? NSNumber).map { $0.boolValue == b && "\(type(of: $0))".contains("Bool") } == true ? nil : "\(path): \(b) against \(value)"
        case let .number(n):
            // Foundation keeps long numbers as decimals of 38 digits, whose conversion to a double is
            // not always the nearest one: equal within 1e-12.
            guard let other = (value as? NSNumber)?.doubleValue, abs(other - n) <= 1e-12 * abs(n) else { return "\(path): \(n) against \(value)" }
            return nil
        case let .string(s): return (value as? String).map { $0.unicodeScalars.elementsEqual(s.unicodeScalars) } == true ? nil : "\(path): a string against \(value)"
        case let .array(items):
            guard let array = value as? [Any], array.count == items.count else { return "\(path): an array of \(items.count) against \(value)" }
            for (i, (item, other)) in zip(items, array).enumerated() {
                if let d = difference(item, other, path: "\(path)[\(i)]") { return d }
            }
            return nil
        case let .structure(properties, keys):
            guard let object = value as? [String: Any], object.count == keys.count else { return "\(path): a structure of \(keys.count) keys against \(value)" }
            for key in keys {
                guard let other = object[key] else { return "\(path): key \(key) missing" }
                if let d = difference(properties[key]!, other, path: path + "." + key) { return d }
            }
            return nil
        }
    }

    static func generationSchema(_ data: Data) {
        guard let schema = try? JSONDecoder().decode(GenerationSchema.self, from: data) else { return }
        guard let encoded = try? JSONEncoder().encode(schema) else { fatalError("a decoded schema does not encode") }
        guard let again = try? JSONDecoder().decode(GenerationSchema.self, from: encoded) else {
            fatalError("an encoded schema does not decode: \(String(decoding: encoded, as: UTF8.self))")
        }
        precondition(again == schema, "schema changed in a JSON round trip")
        guard let form = try? GeneratedContent(json: String(decoding: encoded, as: UTF8.self)) else {
            fatalError("an encoded schema is not JSON the package reads: \(String(decoding: encoded, as: UTF8.self))")
        }
        // Guided output is always valid: an answer conforms to the schema as its JSON form says
        // (read by a checker independent of the decoder); a refusal names the schema or the budget.
        // The same for the arguments of a tool whose parameters are the schema, called as `.required`
        // until it throws on its second call, in the bundled control pieces, in a ChatML
        // vocabulary's `<tool_call>{"name":…,"arguments":…}</tool_call>` tags, as a Llama 3.1
        // response's JSON object and in Mistral v3's `[TOOL_CALLS] [{…}]`.
        let calls = Locked<[GeneratedContent]>([])
        let outcomes = Locked<[Result<GeneratedContent?, any Error>]>([])
        let done = DispatchSemaphore(value: 0)
        Task {
            let answered = await Result(running: { () async throws -> GeneratedContent? in
                try await LanguageModelSession(model: tiny)
                    .respond(to: "Go.", schema: schema, options: GenerationOptions(maximumResponseTokens: 24)).rawContent
            })
            // And after a few tokens of reasoning, which the value's grammar must not see.
            let reasoned = await Result(running: { () async throws -> GeneratedContent? in
                try await LanguageModelSession(model: tiny)
                    .respond(to: "Go.", schema: schema, options: GenerationOptions(maximumResponseTokens: 24),
                             contextOptions: ContextOptions(reasoningLevel: .custom("3"))).rawContent
            })
            var results = [answered, reasoned]
            for (model, budget) in [(tiny, 32), (taggedTiny, 64), (llama3Tiny, 64), (mistralTiny, 64)] {
                let probe = ProbeTool(parameters: schema, calls: Locked([]))
                results.append(await Result(running: { () async throws -> GeneratedContent? in
                    _ = try await LanguageModelSession(model: model, tools: [probe])
                        .respond(to: "Go.", options: GenerationOptions(maximumResponseTokens: budget, toolCallingMode: .required))
                    return nil
                }))
                calls.withLock { $0 += probe.calls.withLock { $0 } }
            }
            outcomes.withLock { $0 = results }
            done.signal()
        }
        done.wait()
        for outcome in outcomes.withLock({ $0 }) {
            switch outcome {
            case let .success(content?): conform(content, form, "a guided response")
            case .success(nil): break
            case let .failure(error as LanguageModelSession.ToolCallError) where error.underlyingError is ProbeTool.Enough: break
            case let .failure(error):
                switch error as? LanguageModelError {
                case .unsupportedGenerationGuide?, .invalidOptions?, .contextSizeExceeded?: break
                default: fatalError("a guided request failed with \(error)")
                }
            }
        }
        for arguments in calls.withLock({ $0 }) { conform(arguments, form, "a tool call's arguments") }
    }

    private static func conform(_ content: GeneratedContent, _ form: GeneratedContent, _ what: String) {
        if let problem = try? SchemaConformance.problem(content, schema: form) {
            fatalError("\(what) breaks the schema: \(problem)\nvalue: \(content.jsonString)")
        }
    }
}

/// A tool whose parameters are any schema; it keeps the arguments it is called with and throws
/// on its second call, which ends a `.required` request.
private struct ProbeTool: Tool {
    struct Enough: Error {}
    let name = "probe"
    let description = "Takes what its schema allows."
    let parameters: GenerationSchema
    let calls: Locked<[GeneratedContent]>

    func call(arguments: GeneratedContent) async throws -> String {
        guard calls.withLock({ $0.append(arguments); return $0.count }) < 2 else { throw Enough() }
        return "done"
    }
}

extension Result where Failure == any Error {
    /// The outcome of an async throwing body.
    fileprivate init(running body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
