extension LanguageModelSession {
    /// Token counts and timings of a request (or, as ``LanguageModelSession/usage``, of a whole session).
    public struct Usage: Sendable, Equatable {
        /// Input token counts.
        public struct Input: Sendable, Equatable {
            /// Tokens the request rendered (instructions, tools, history, prompt, response header).
            public var totalTokenCount: Int
            /// Of those, tokens not computed: reused from the session's own KV cache or restored
            /// from the model's shared prefix store (the three counts below add up to it).
            public var cachedTokenCount: Int
            /// Cached tokens the session's own KV cache already held.
            public var cachedFromSessionCount = 0
            /// Cached tokens copied from the shared prefix store's memory (computed by another
            /// session on the same model, or by this one before its cache was invalidated).
            public var cachedFromSharedStoreCount = 0
            /// Cached tokens read from the store's disk tier (computed in an earlier launch).
            public var cachedFromDiskCount = 0

            /// Counts with nothing cached from the store.
            public init(totalTokenCount: Int, cachedTokenCount: Int) {
                self.totalTokenCount = totalTokenCount
                self.cachedTokenCount = cachedTokenCount
                cachedFromSessionCount = cachedTokenCount
            }
        }

        /// Output token counts.
        public struct Output: Sendable, Equatable {
            /// Tokens generated.
            public var totalTokenCount: Int
            /// Of those, tokens of reasoning before the response (``ContextOptions/reasoningLevel``).
            public var reasoningTokenCount: Int

            /// Output counts.
            public init(totalTokenCount: Int, reasoningTokenCount: Int = 0) {
                self.totalTokenCount = totalTokenCount
                self.reasoningTokenCount = reasoningTokenCount
            }
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
        /// Guided generation: nanoseconds spent computing and applying each token's mask
        /// (for benchmarks; not summed over requests).
        package var guidedMaskNanoseconds: [UInt64] = []

        /// Cached input tokens ÷ input tokens (0 when there was no input).
        public var cacheHitRate: Double {
            input.totalTokenCount == 0 ? 0 : Double(input.cachedTokenCount) / Double(input.totalTokenCount)
        }

        /// Tokens decoded per second after the first one.
        public var decodeTokensPerSecond: Double {
            let seconds = Double(decodeDuration.components.seconds) + Double(decodeDuration.components.attoseconds) * 1e-18
            return seconds > 0 ? Double(max(0, output.totalTokenCount - 1)) / seconds : 0
        }

        /// Further statistics, keyed by name (FoundationModels' iOS 27 field; this package's own
        /// statistics have typed properties, so the session leaves it empty).
        public var metadata: [String: GeneratedContent] = [:]

        /// Empty usage.
        public init() {}

        /// Usage with the given counts (FoundationModels' iOS 27 initializer); timings zero.
        public init(input: Input, output: Output, metadata: [String: any ConvertibleToGeneratedContent] = [:]) {
            self.input = input
            self.output = output
            self.metadata = metadata.mapValues(\.generatedContent)
        }

        static func + (a: Usage, b: Usage) -> Usage {
            var sum = a
            sum.input.totalTokenCount += b.input.totalTokenCount
            sum.input.cachedTokenCount += b.input.cachedTokenCount
            sum.input.cachedFromSessionCount += b.input.cachedFromSessionCount
            sum.input.cachedFromSharedStoreCount += b.input.cachedFromSharedStoreCount
            sum.input.cachedFromDiskCount += b.input.cachedFromDiskCount
            sum.output.totalTokenCount += b.output.totalTokenCount
            sum.output.reasoningTokenCount += b.output.reasoningTokenCount
            sum.metadata.merge(b.metadata) { _, later in later }
            sum.computedTokenCount += b.computedTokenCount
            sum.prefillDuration += b.prefillDuration
            sum.timeToFirstToken += b.timeToFirstToken
            sum.decodeDuration += b.decodeDuration
            return sum
        }
    }
}
