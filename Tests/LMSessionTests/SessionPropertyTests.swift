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
    static func makeSession(_ state: AppState) -> LanguageModelSession {
        let profile = LanguageModelSession.Profile {
            "You are a coaching assistant."
            if state.counter % 2 == 1 { WeatherTool() }
            if state.flag { "The user is training for a marathon." }
        }
        .historyTransform { Array($0.suffix(state.keep)) }
        .model(tinyModel)
        return LanguageModelSession(profile: profile)
    }

    @Test func randomOperationSequences_keepCacheExactAndUsageHonest() async {
        await propertyCheck(count: 15, input: Gen.int(in: 0 ... 9_999).array(of: 1 ... 8)) { operations in
            let state = AppState()
            let session = Self.makeSession(state)
            for op in operations {
                switch op % 6 {
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
                default:
                    let before = try await session.cachedTokens
                    let response = try await session.respond(to: "Question \(op)?", options: short(1 + op % 5))
                    let after = try await session.cachedTokens
                    let input = response.usage.input.totalTokenCount
                    let rendered = Array(after.prefix(input))
                    let common = zip(before, rendered).prefix { $0 == $1 }.count
                    #expect(after.count == input + response.usage.output.totalTokenCount + 1)
                    #expect(response.usage.input.cachedTokenCount == min(common, input - 1), "\(operations)")
                    #expect(response.usage.computedTokenCount == input - response.usage.input.cachedTokenCount)
                }
                let deviation = try await session.engine().cacheDeviation()
                #expect(deviation <= 1e-4, "\(operations)")
            }
        }
    }
}
