import Foundation
@testable import LMSession
import LMRuntime
import LMTestSupport
import PropertyBased
import Testing

/// Random sequences of requests, transforms, instruction toggles, tool changes, trims and
/// cancellations: after each step the cache equals a fresh prefill of its tokens, and the
/// usage numbers equal an independent count of the common prefix.
struct SessionPropertyTests {
    static func makeSession(_ state: AppState, model: any LanguageModel = tinyModel,
                            history: [Transcript.Entry] = []) -> LanguageModelSession {
        let profile = LanguageModelSession.Profile {
            "You are a coaching assistant."
            if state.counter % 2 == 1 { WeatherTool() }
            if state.flag { "The user is training for a marathon." }
        }
        .historyTransform { Array($0.suffix(state.keep)) }
        .model(model)
        return LanguageModelSession(profile: profile, history: history)
    }

    @Test func randomOperationSequences_keepCacheExactAndUsageHonest() async {
        await propertyCheck(count: 15, input: Gen.int(in: 0 ... 9_999).array(of: 1 ... 8)) { operations in
            try await Self.run(operations, store: nil)
        }
    }

    /// The same with the model's shared prefix store on (memory with a limit that forces
    /// evictions, and a disk tier), plus two more operations: replacing the session by a new
    /// one that continues its transcript (a restore from memory), and a relaunch (a new model
    /// on the same directory: a restore from disk).
    @Test func randomOperationSequences_withASharedStore_keepCacheExactAndUsageHonest() async {
        await propertyCheck(count: 15, input: Gen.int(in: 0 ... 9_999).array(of: 1 ... 10)) { operations in
            let directory = Fixtures.temporaryFile("property-store")
            defer { try? FileManager.default.removeItem(at: directory) }
            try await Self.run(operations, store: directory)
        }
    }

    /// Runs `operations`; with `store`, sessions share a prefix store persisted there.
    static func run(_ operations: [Int], store directory: URL?) async throws {
        let tiny = try tinyModel.loaded()
        let limit = 150 * 2 * tiny.weights.config.layerCount * tiny.weights.config.kvDim * 4
        func freshModel() throws -> any LanguageModel {
            guard let directory else { return tinyModel }
            return SystemLanguageModel(try LoadedModel(weights: tiny.weights, tokenizer: tiny.tokenizer, prefixStore:
                .persistent(in: directory, memoryByteLimit: limit)))
        }
        let state = AppState()
        var model = try freshModel()
        var session = makeSession(state, model: model)
        for op in operations {
            switch op % (directory == nil ? 6 : 8) {
            case 0: state.flag.toggle()
            case 1: state.counter += 1
            case 2: state.keep = state.keep == .max ? 1 + 2 * (op % 3) : .max
            case 3:
                // A request cancelled after a few tokens.
                let stream = session.streamResponse(to: "Cancelled question \(op)?", options: short(50))
                let task = Task {
                    var seen = 0
                    for try await _ in stream {
                        seen += 1
                        if seen == 1 + op % 4 { withUnsafeCurrentTask { $0?.cancel() } }
                    }
                }
                _ = try? await task.value
                while session.isResponding { try await Task.sleep(for: .milliseconds(2)) }
            case 6: session = makeSession(state, model: model, history: session.transcript.history)
            case 7:
                try model.loaded().prefixStore.flush()
                model = try freshModel()
                session = makeSession(state, model: model, history: session.transcript.history)
            default:
                let before = try await session.cachedTokens
                let response = try await session.respond(to: "Question \(op)?", options: short(1 + op % 5))
                let after = try await session.cachedTokens
                let usage = response.usage, input = usage.input.totalTokenCount
                let rendered = Array(after.prefix(input))
                let common = zip(before, rendered).prefix { $0 == $1 }.count
                #expect(after.count == input + usage.output.totalTokenCount + 1)
                #expect(usage.input.cachedFromSessionCount == min(common, input - 1), "\(operations)")
                #expect(usage.input.cachedTokenCount == usage.input.cachedFromSessionCount
                    + usage.input.cachedFromSharedStoreCount + usage.input.cachedFromDiskCount)
                if directory == nil { #expect(usage.input.cachedTokenCount == usage.input.cachedFromSessionCount) }
                #expect(usage.computedTokenCount == input - usage.input.cachedTokenCount)
            }
            let deviation = try await session.engine().cacheDeviation()
            #expect(deviation <= 1e-4, "\(operations)")
            let store = try model.loaded().prefixStore
            #expect(store.checkInvariants() == nil, "\(operations)")
        }
    }
}
