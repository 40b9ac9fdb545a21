import Foundation
@testable import LMSession
@testable import LMRuntime
import LMTestSupport
import Synchronization
import Testing

/// The bundled `tiny` model, loaded once for every session test, with the shared prefix store off:
/// these tests pin what one session's own cache does, and sessions of parallel tests must not
/// see each other's rows. The store's own tests make models of their own.
let tinyModel = SystemLanguageModel(named: "tiny", prefixStore: .memoryOnly(memoryByteLimit: 0))
let tokenizer = Fixtures.bundledTokenizer

/// Token counts computed from the tokenizer alone (independent of the renderer).
enum Count {
    /// `BOS <|system|> text <|end|>`.
    static func instructions(_ texts: [String], tools: [String] = []) -> Int {
        2 + texts.map { tokenizer.encode($0, bos: false).count }.reduce(0, +) + tools.map {
            tokenizer.encode($0, bos: false).count
        }.reduce(0, +) + 1
    }

    /// `<|user|> text <|end|>`.
    static func prompt(_ text: String) -> Int { tokenizer.encode(text, bos: false).count + 2 }

    /// A tool definition's text.
    static func tool(_ t: some Tool) -> String { "Tool \(t.name): \(t.description) Arguments: \(t.parameters.debugDescription)" }
}

/// The Qwen2 fixture vocabulary turned into a Llama 3 one: its chat tokens renamed to Llama 3's
/// (`<|start_header_id|>`, `<|eot_id|>`, `<|begin_of_text|>`), `<|end_header_id|>` and `extra`
/// added as control tokens, the `llama-bpe` pre-tokenizer, BOS added.
func llama3Vocabulary(adding extra: [String] = []) throws -> Tokenizer {
    let chatML = try Tokenizer(ggufAt: Fixtures.packageRoot.appendingPathComponent("Tests/Fixtures/byte-level-bpe/qwen2.gguf"))
    let renamed = ["<|im_start|>": "<|start_header_id|>", "<|im_end|>": "<|eot_id|>", "<|endoftext|>": "<|begin_of_text|>"]
    let tokens = chatML.byteLevel!.storedTokens.map { renamed[$0] ?? $0 } + ["<|end_header_id|>"] + extra
    let types = chatML.byteLevel!.tokenTypes + [Int32](repeating: 3, count: 1 + extra.count)
    var writer = GGUFWriter()
    for (key, value) in chatML.ggufMetadata() {
        switch key {
        case "tokenizer.ggml.tokens": writer.set(key, .array(tokens.map(GGUFValue.string)))
        case "tokenizer.ggml.token_type": writer.set(key, .array(types.map(GGUFValue.int32)))
        case "tokenizer.ggml.add_bos_token": writer.set(key, .bool(true))
        case "tokenizer.ggml.pre": writer.set(key, .string("llama-bpe"))
        default: writer.set(key, value)
        }
    }
    return try Tokenizer(gguf: GGUFFile(data: writer.data()))
}

/// Options that keep responses short and deterministic.
func short(_ tokens: Int = 6) -> GenerationOptions { GenerationOptions(maximumResponseTokens: tokens) }

extension SessionEngine {
    /// The DESIGN.md invariant: the cache equals a fresh prefill of its own tokens.
    func cacheDeviation() throws -> Float { try cache.deviationFromFreshPrefill(transformer).maxRelativeError }
}

extension LanguageModelSession {
    /// Steers decoding through one tool round: first `call`'s tokens, then (in the round after
    /// the tool ran) `answer`'s.
    func steer(call: [Int], then answer: [Int]) {
        let script = Mutex((round: 0, step: 0))
        setTokenSteering { generated in
            script.withLock { s in
                if generated.isEmpty, s.step > 0 { s = (s.round + 1, 0) }   // a new round after the tool ran
                let plan = s.round == 0 ? call : answer
                defer { s.step += 1 }
                return s.step < plan.count ? plan[s.step] : nil
            }
        }
    }

    /// Fails the test unless the KV cache equals a fresh prefill of its tokens.
    func expectCacheExact(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deviation = try await engine().cacheDeviation()
        #expect(deviation <= 1e-4, "cache deviates from a fresh prefill by \(deviation)", sourceLocation: sourceLocation)
    }
}

/// App state a dynamic profile or instructions body reads (a reference, so tests can flip it).
final class AppState: @unchecked Sendable {
    private let lock = NSLock()
    private var _flag = false
    private var _counter = 0
    private var _keep = Int.max

    var flag: Bool {
        get { lock.withLock { _flag } }
        set { lock.withLock { _flag = newValue } }
    }

    var counter: Int {
        get { lock.withLock { _counter } }
        set { lock.withLock { _counter = newValue } }
    }

    var keep: Int {
        get { lock.withLock { _keep } }
        set { lock.withLock { _keep = newValue } }
    }
}

@Generable
struct WeatherQuery {
    @Guide(description: "A city name")
    let city: String
}

/// A tool that returns a canned answer and counts its calls.
struct WeatherTool: Tool {
    final class Counter: Sendable { let value = Mutex(0) }
    let calls = Counter()
    var name: String { "weather" }
    var description: String { "Current weather for a city." }
    func call(arguments: WeatherQuery) async throws -> String {
        calls.value.withLock { $0 += 1 }
        return "Sunny, 21 degrees in \(arguments.city)"
    }
}

@Generable
struct DayQuery {
    let day: String
}

/// Another tool, for adding mid-session.
struct CalendarTool: Tool {
    var name: String { "calendar" }
    var description: String { "Lists events for a day." }
    func call(arguments: DayQuery) async throws -> String { "No events on \(arguments.day)" }
}

@Generable
struct NoArguments {}

/// A tool that waits until the test opens its gate: it holds a request in flight
/// deterministically, without blocking a thread.
struct GateTool: Tool {
    final class Gate: Sendable {
        let entered = Mutex(false)
        let stream: AsyncStream<Void>
        let continuation: AsyncStream<Void>.Continuation
        init() { (stream, continuation) = AsyncStream<Void>.makeStream() }
        func open() { continuation.yield(); continuation.finish() }
        var hasEntered: Bool { entered.withLock { $0 } }
    }

    let gate = Gate()
    var name: String { "wait" }
    var description: String { "Waits for the test." }
    func call(arguments: NoArguments) async throws -> String {
        gate.entered.withLock { $0 = true }
        for await _ in gate.stream {}
        return "done"
    }

    /// Steering that makes the model call this tool first, then sample freely.
    func steering() throws -> @Sendable ([Int]) -> Int? {
        let renderer = PromptRenderer(tokenizer: tokenizer)
        let call = [renderer.toolCall!] + tokenizer.encode("wait {}", bos: false) + [renderer.end]
        let done = Mutex(false)
        return { generated in
            done.withLock { finished in
                if finished || generated.count >= call.count { return nil }
                // The last steered token: the session closes the call with <|end|> itself once the
                // arguments are complete, so steering may not be asked for it.
                if generated.count >= call.count - 2 { finished = true }
                return call[generated.count]
            }
        }
    }

    /// Waits (cooperatively) until `request` is inside the tool; throws ``NeverEntered`` when the
    /// request ends first, so a model that stops calling the tool fails the test instead of hanging it.
    func waitUntilEntered<Success: Sendable>(by request: Task<Success, any Error>) async throws {
        let ended = Flag()
        Task { _ = await request.result; ended.value.withLock { $0 = true } }
        while !gate.hasEntered {
            guard !ended.value.withLock({ $0 }) || gate.hasEntered else { throw NeverEntered() }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Whether a request has ended, set from another task.
    final class Flag: Sendable { let value = Mutex(false) }

    /// The request a test waited on ended without calling the tool.
    struct NeverEntered: Error, CustomStringConvertible {
        var description: String { "the request ended without calling the gate tool" }
    }
}

/// The Qwen2 fixture vocabulary (ChatML) with `extra` added as user-defined tokens, as Qwen3's
/// files have `<think>` and `</think>`.
func chatMLVocabulary(adding extra: [String]) throws -> Tokenizer {
    let chatML = try Tokenizer(ggufAt: Fixtures.packageRoot.appendingPathComponent("Tests/Fixtures/byte-level-bpe/qwen2.gguf"))
    var writer = GGUFWriter()
    for (key, value) in chatML.ggufMetadata() {
        switch key {
        case "tokenizer.ggml.tokens": writer.set(key, .array((chatML.byteLevel!.storedTokens + extra).map(GGUFValue.string)))
        case "tokenizer.ggml.token_type":
            writer.set(key, .array((chatML.byteLevel!.tokenTypes + [Int32](repeating: 4, count: extra.count)).map(GGUFValue.int32)))
        default: writer.set(key, value)
        }
    }
    return try Tokenizer(gguf: GGUFFile(data: writer.data()))
}
