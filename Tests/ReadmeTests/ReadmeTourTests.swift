import Foundation
import LMRuntime
import LMSession
import ResponseCache
import Testing

// README's Swift examples, compiled: each ```swift block of README.md appears in this file line by
// line (in order, indentation and `import` lines aside), with the declarations it leaves to the
// reader (`url`, `app`, `session`, ...), in a module of its own so its type names are README's. The
// examples are compiled: a change to the API that breaks one breaks this target's build, and
// `readme_everySwiftExampleIsCompiledHere()` fails when README's text and this file drift apart.
// The session example is also run, and the numbers its comments give are checked.

// Block 1: the runtime.
func runtime() throws {
    let catalog = ModelCatalog.bundled                       // this package's Models/
    let config = try catalog.config(named: "base")
    let model = Transformer(weights: try catalog.weights(for: config))
    let tokenizer = try catalog.tokenizer(for: config)

    let cache = model.makeCache()                            // K/V rows for the whole context, allocated once
    let prompt = tokenizer.encode("Suggest a recipe using")
    var logits = try model.forward(prompt, cache: cache)     // one batched prefill; last token's logits

    // Reuse: keep the common prefix, recompute only the rest.
    let next = tokenizer.encode("Suggest a recipe using lentils")
    cache.truncate(to: cache.commonPrefixLength(with: next))
    logits = try model.forward(Array(next[cache.count...]), cache: cache)
    _ = logits

    var sampler = try Sampler(.topP(0.9, temperature: 0.8), seed: 1)
    let out = try model.generate(prompt: prompt, maxNewTokens: 32, sampler: &sampler, cache: model.makeCache())
    print(tokenizer.decode(prompt + out.generatedTokens))
}

// Block 2: a GGUF model's weights and vocabulary.
func gguf(url: URL) throws {
    let file = try GGUFFile(contentsOf: url)                  // parsed once for both
    let weights = try ModelWeights.gguf(file, contextLength: 8192)   // SmolLM, Qwen2, Llama 3, ...; at most 8,192 positions
    let vocabulary = try Tokenizer(gguf: file, path: url.path)
    let ids = vocabulary.encode("It's 12:30.")               // BOS only where the vocabulary adds one
    print(vocabulary.words("It's 12:30."))                   // the pre-tokenizer's words: ["It", "'s", " ", "1", "2", ":", ...] under smollm
    print(vocabulary.decode(ids))                            // byte-level BPE spells the text back exactly
    _ = weights
}

// Block 3: a session, its reuse and a saved conversation (run by `readme_sessionExamplePrintsWhatItsCommentsSay`).
func session() async throws -> (second: LanguageModelSession.Usage, third: LanguageModelSession.Usage, restoredTokens: Int) {
    let session = LanguageModelSession(instructions: "You are a cooking assistant. Suggest simple recipes.")
    let options = GenerationOptions(maximumResponseTokens: 24)

    session.prewarm(promptPrefix: "Suggest a recipe using")   // computes instructions + the prefix now
    let first = try await session.respond(to: "Suggest a recipe using lentils", options: options)
    let second = try await session.respond(to: "Make it vegan.", options: options)
    print(second.usage.input.totalTokenCount, second.usage.input.cachedTokenCount, second.usage.cacheHitRate)
    // 58 49 0.845 — everything before the new prompt came from the cache
    _ = first

    // Save and restore a conversation.
    let data = try JSONEncoder().encode(session.transcript)
    let restored = LanguageModelSession(transcript: try JSONDecoder().decode(Transcript.self, from: data))
    let third = try await restored.respond(to: "How long does it take?", options: options)
    print(third.usage.input.cachedFromSharedStoreCount)   // the whole saved conversation: its K/V came from the
    // model's shared prefix store, nothing was recomputed
    print(third.invalidation!)   // session cache lost from token 0 (instructions (text 0)): emptyCache, ...;
    // N restored from the shared store (N memory, 0 disk), recomputed from token N
    return (second.usage, third.usage, third.invalidation?.restoredFromSharedStoreCount ?? -1)
}

// Block 4: dynamic instructions and a profile.
struct WeatherTool: Tool {
    @Generable struct Arguments { let city: String }
    var name: String { "weather" }
    var description: String { "Current weather for a city." }
    func call(arguments: Arguments) async throws -> String { "Sunny in \(arguments.city)" }
}
final class AppModel: @unchecked Sendable { var isRaceWeek = false }
func stripDebugMetadata(_ entry: Transcript.Entry) -> Transcript.Entry { entry }

struct CoachInstructions: DynamicInstructions {
    let app: AppModel                     // your state (a reference, read at each request)
    var body: some DynamicInstructions {
        Instructions("You are a running coach. Answer briefly.")
        WeatherTool()
        if app.isRaceWeek { "The user races on Sunday: keep every session easy." }   // conditional last
    }
}

struct CoachProfile: LanguageModelSession.DynamicProfile {
    @LanguageModelSession.SessionProperty(\.history) var history
    let app: AppModel
    var body: some LanguageModelSession.DynamicProfile {
        LanguageModelSession.Profile { CoachInstructions(app: app) }
            .historyTransform { $0.map(stripDebugMetadata) }      // stateless: what the model sees
            .onResponse { if history.count > 20 { history = Array(history.suffix(8)) } }   // stateful
            .maximumResponseTokens(64)
    }
}

func coach(app: AppModel) async throws {
    let coach = LanguageModelSession(profile: CoachProfile(app: app))
    let reply = try await coach.respond(to: "How far today?")
    if let lost = reply.invalidation { print(lost) }   // e.g. recomputed from token 37 (instructions (text 1)): prefixChanged, ...
}

// Block 5: reasoning.
func plan(session: LanguageModelSession) async throws {
    let light = ContextOptions(reasoningLevel: .light)      // at most 64 tokens of reasoning
    let week = try await session.respond(to: "Plan my week.", contextOptions: light)
    print(week.usage.output.reasoningTokenCount, week.transcriptEntries.map(\.kind))   // e.g. 64 ["prompt", "reasoning", "response"]
    let next = try await session.respond(to: "Make Tuesday easier.")
    if let lost = next.invalidation { print(lost) }         // recomputed from where the reasoning began
}

// Block 6: guided generation.
@Generable
struct Recommendation {
    @Guide(description: "A short title for the drill") let title: String
    @Guide(description: "What to do and why") let description: String
}

@Generable
struct AISummary {
    @Guide(description: "Overall performance insight and analysis text")
    let overallInsight: String
    @Guide(description: "Array of 2-3 personalized drill recommendations", .count(2...3))
    let recommendations: [Recommendation]
    @Guide(description: "Confidence from 1 to 5", .range(1...5))
    let confidence: Int
    let note: String?                                   // the model may write null
}

func guided() async throws {
    let session = LanguageModelSession(instructions: "You are a tennis coach.")
    let summary = try await session.respond(to: "Summarize my week.", generating: AISummary.self).content
    _ = summary

    // Streaming: each snapshot is the PartiallyGenerated form (properties not generated yet are nil).
    for try await partial in session.streamResponse(to: "And next week?", generating: AISummary.self) {
        print(partial.content.overallInsight ?? "…", partial.rawContent.isComplete)
    }

    // A schema built at run time, and a follow-up that leaves the schema out of the prompt.
    let order = DynamicGenerationSchema(name: "Order", properties: [
        .init(name: "item", schema: .init(name: "Item", anyOf: ["tea", "coffee"])),
        .init(name: "cups", schema: .init(type: Int.self, guides: [.range(1...4)])),
    ])
    let content = try await session.respond(to: "Order for two", schema: try GenerationSchema(root: order, dependencies: []),
                                            includeSchemaInPrompt: false).content
    print(content.jsonString, try content.value(Int.self, forProperty: "cups"))
}

// Block 7: the shared prefix store.
func prefixStore(keyFromTheKeychain: [UInt8], cachesDirectory: URL) async throws {
    // Memory only (the default), within a byte limit (default 1/16 of RAM, at most 1 GiB):
    let model = SystemLanguageModel(named: "base", prefixStore: .memoryOnly(memoryByteLimit: 256 << 20))
    _ = model

    // Persistent, optionally encrypted (AES-GCM) with a 32-byte key the app keeps:
    let key = try PrefixStore.EncryptionKey(bytes: keyFromTheKeychain)
    let persistent = SystemLanguageModel(named: "base", prefixStore: .persistent(
        in: cachesDirectory.appendingPathComponent("kv"), diskByteLimit: 1 << 30, encryptionKey: key))
    // or, with no code change: KVSESSION_KV_CACHE_DIR=/path/to/a/directory

    let session = LanguageModelSession(model: persistent, instructions: "You are a running coach.")
    _ = try await session.respond(to: "Plan my week.")
    try await session.pinInstructions()              // never evict these instructions' K/V
    let store = try persistent.loaded().prefixStore
    print(store.statistics)                          // hits (and partial ones), tokens from memory and disk, evictions, rejected files
    store.removeAll(includingDisk: true)             // clear it
    // .memoryOnly(memoryByteLimit: 0) turns sharing off.
}

// Block 8: adapters.
func adapters(url: URL) async throws {
    let adapter = try SystemLanguageModel.Adapter(fileURL: url)       // or Adapter(name: "demo")
    try await adapter.compile()                                        // nothing to do here; compiles unchanged
    let tagger = SystemLanguageModel(adapter: adapter)                 // `base` + the adapter
    let custom = SystemLanguageModel(named: "tiny", adapter: adapter)  // any model source takes one
    print(adapter.creatorDefinedMetadata)                              // [String: Any] from the file
    _ = (tagger, custom)
}

// Block 9: the response cache.
struct Week: Sendable { var id = "2026-W49" }
func summarise(_ week: Week) async throws -> CachedResponse { CachedResponse(content: week.id, tokenIDs: []) }
func show(_ value: CachedResponse?, stale: Bool, error: String?) {}

func responseCache(session: LanguageModelSession, options: GenerationOptions, week: Week, key: CacheKey,
                          cachesDirectory: URL) async throws {
    let cache = ResponseCache<CachedResponse>(configuration: .init(
        directory: cachesDirectory.appendingPathComponent("responses"),   // its own folder, never user data
        timeToLive: 7 * 86_400, staleAfter: 3_600, retentionDays: 30))

    // Through a session: the key covers the model and its config, the exact rendered tokens
    // (instructions, tools, history, prompt) and the options.
    let answer = try await session.respond(to: "Summarise my week.", options: options, cache: cache,
                                           policy: .cacheElseGenerate, dataFingerprint: week.id, tags: ["home"])
    print(answer.origin)   // .memory, .disk or .generated

    // Or any value, by hand, with stale-while-revalidate:
    for try await answer in cache.responses(for: key, policy: .cacheThenGenerate, generate: { try await summarise(week) }) {
        show(answer.value, stale: answer.isCached, error: answer.refreshError)   // cached now, fresh next
    }
    await cache.invalidate(tag: "home")            // or key:, dataFingerprint:, invalidateAll()
}

struct ReadmeTourTests {
    /// The non-blank lines of `text`, trimmed, without `import` lines.
    static func lines(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("import ") }
    }

    /// README's ```swift blocks.
    static func examples(in readme: String) -> [[String]] {
        var blocks: [[String]] = [], current: [String]?
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.hasPrefix("```swift") { current = [] } else if current != nil, line.hasPrefix("```") {
                blocks.append(lines(current!.joined(separator: "\n")))
                current = nil
            } else { current?.append(String(line)) }
        }
        return blocks
    }

    /// The first line of `block` not found, in order, among `lines` from `start` on (`nil`: all
    /// found), and where the search ended.
    static func missing(_ block: [String], in lines: [String], from start: Int) -> (line: String?, end: Int) {
        var position = start
        for wanted in block {
            guard let found = lines[position...].firstIndex(of: wanted) else { return (wanted, position) }
            position = found + 1
        }
        return (nil, position)
    }

    @Test func readme_everySwiftExampleIsCompiledHere() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let tour = Self.lines(try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8))
        let blocks = Self.examples(in: readme)
        #expect(blocks.count >= 8)
        var position = 0
        for (i, block) in blocks.enumerated() {
            let (line, end) = Self.missing(block, in: tour, from: position)
            #expect(line == nil, "README's Swift example \(i + 1) has a line this file lacks (or has earlier): \(line ?? "")")
            position = end
        }
    }

    /// README's session example on the default model prints the numbers its comments give: 58
    /// tokens of which 49 cached (0.845), and a restored conversation computing only its new prompt.
    @Test func readme_sessionExamplePrintsWhatItsCommentsSay() async throws {
        let (second, third, restored) = try await session()
        #expect(second.input.totalTokenCount == 58 && second.input.cachedTokenCount == 49)
        #expect(abs(second.cacheHitRate - 0.845) < 0.0005)
        #expect(third.input.cachedFromSharedStoreCount == restored && restored > second.input.totalTokenCount)
    }

    /// The check itself: a line that is not here, or blocks out of order, are found.
    @Test func missing_findsALineThatIsAbsentOrOutOfOrder() {
        let tour = ["a", "b", "c", "d"]
        #expect(Self.missing(["b", "d"], in: tour, from: 0).line == nil)
        #expect(Self.missing(["b", "x"], in: tour, from: 0).line == "x")
        #expect(Self.missing(["d", "b"], in: tour, from: 0).line == "b")
        #expect(Self.missing(["a"], in: tour, from: 2).line == "a")
        #expect(Self.examples(in: "text\n```swift\nimport X\n  let a = 1\n\n```\n```\nb\n```").map { $0 } == [["let a = 1"]])
    }
}
