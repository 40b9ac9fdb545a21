import Foundation
@testable import LMSession
import LMRuntime
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

/// Options that keep responses short and deterministic.
func short(_ tokens: Int = 6) -> GenerationOptions { GenerationOptions(maximumResponseTokens: tokens) }

extension SessionEngine {
    /// The DESIGN.md invariant: the cache equals a fresh prefill of its own tokens.
    func cacheDeviation() throws -> Float { try cache.deviationFromFreshPrefill(transformer).maxRelativeError }
}

extension LanguageModelSession {
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

    /// Waits (cooperatively) until a request is inside the tool.
    func waitUntilEntered() async throws {
        while !gate.hasEntered { try await Task.sleep(for: .milliseconds(2)) }
    }
}
