/// Where and why a request stopped reusing the KV cache.
public struct InvalidationReport: Sendable, Equatable, CustomStringConvertible {
    /// Why cached tokens were not reused.
    public enum Reason: String, Sendable, Equatable {
        /// The rendered tokens differ from the cached ones at ``InvalidationReport/position``.
        case prefixChanged
        /// The cache held nothing (a new or rehydrated session).
        case emptyCache
        /// The active profile changed: the session deliberately starts over.
        case profileSwitch
    }

    /// A part of the rendered request.
    public enum Segment: Sendable, Equatable, CustomStringConvertible {
        /// Instruction text number `index` (0-based, declaration order).
        case instructions(index: Int)
        /// The definition of the tool with this name.
        case toolDefinition(name: String)
        /// History entry number `index` (0-based, after the instructions) of the given kind.
        case transcriptEntry(index: Int, kind: String)
        /// The new prompt.
        case prompt
        /// The marker that opens the response.
        case responseHeader

        /// A short phrase naming the segment.
        public var description: String {
            switch self {
            case let .instructions(index): "instructions (text \(index))"
            case let .toolDefinition(name): "tool definition '\(name)'"
            case let .transcriptEntry(index, kind): "transcript entry \(index) (\(kind))"
            case .prompt: "the new prompt"
            case .responseHeader: "the response header"
            }
        }
    }

    /// The first recomputed token position.
    public var position: Int
    /// The segment that position falls in.
    public var segment: Segment
    /// Why the cache was not reused from there on.
    public var reason: Reason
    /// Cached tokens thrown away.
    public var discardedTokenCount: Int

    /// One line, e.g. `recomputed from token 12 (instructions (text 0)): prefix changed, 80 cached tokens discarded`.
    public var description: String {
        "recomputed from token \(position) (\(segment)): \(reason.rawValue), \(discardedTokenCount) cached tokens discarded"
    }
}

extension LanguageModelSession {
    /// Token counts and timings of a request (or, as ``LanguageModelSession/usage``, of a whole session).
    public struct Usage: Sendable, Equatable {
        /// Input token counts.
        public struct Input: Sendable, Equatable {
            /// Tokens the request rendered (instructions, tools, history, prompt, response header).
            public var totalTokenCount: Int
            /// Of those, tokens reused from the KV cache.
            public var cachedTokenCount: Int
        }

        /// Output token counts.
        public struct Output: Sendable, Equatable {
            /// Tokens generated.
            public var totalTokenCount: Int
        }

        /// Input counts.
        public var input = Input(totalTokenCount: 0, cachedTokenCount: 0)
        /// Output counts.
        public var output = Output(totalTokenCount: 0)
        /// Prompt-side tokens run through the model: the uncached part of each request (and of
        /// tool rounds) and what prewarming computed. The response's own tokens, and the
        /// closing marker run after it, are not counted.
        public var computedTokenCount = 0
        /// Time spent prefilling.
        public var prefillDuration = Duration.zero
        /// Time from the request's start to its first token (summed over a session's requests).
        public var timeToFirstToken = Duration.zero
        /// Time spent decoding after the first token.
        public var decodeDuration = Duration.zero

        /// Cached input tokens ÷ input tokens (0 when there was no input).
        public var cacheHitRate: Double {
            input.totalTokenCount == 0 ? 0 : Double(input.cachedTokenCount) / Double(input.totalTokenCount)
        }

        /// Tokens decoded per second after the first one.
        public var decodeTokensPerSecond: Double {
            let seconds = Double(decodeDuration.components.seconds) + Double(decodeDuration.components.attoseconds) * 1e-18
            return seconds > 0 ? Double(max(0, output.totalTokenCount - 1)) / seconds : 0
        }

        /// Empty usage.
        public init() {}

        static func + (a: Usage, b: Usage) -> Usage {
            var sum = a
            sum.input.totalTokenCount += b.input.totalTokenCount
            sum.input.cachedTokenCount += b.input.cachedTokenCount
            sum.output.totalTokenCount += b.output.totalTokenCount
            sum.computedTokenCount += b.computedTokenCount
            sum.prefillDuration += b.prefillDuration
            sum.timeToFirstToken += b.timeToFirstToken
            sum.decodeDuration += b.decodeDuration
            return sum
        }
    }

    /// A finished response.
    public struct Response<Content: Sendable>: Sendable {
        /// The generated content.
        public var content: Content
        /// The transcript entries this request added (prompt, tool calls and outputs, response).
        public var transcriptEntries: ArraySlice<Transcript.Entry>
        /// Token counts and timings of this request.
        public var usage: Usage
        /// Why the cache was not fully reused, or `nil` when every cached token was.
        public var invalidation: InvalidationReport?
    }

    /// What to do with the transcript when a response is cut off by the context window.
    public enum TranscriptErrorHandlingPolicy: Sendable, Equatable {
        /// Keep the prompt and the partial response in the transcript.
        case preserveTranscript
        /// Leave the transcript as it was before the request.
        case revertTranscript
    }
}
