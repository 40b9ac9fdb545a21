/// How a response is sampled and how long it may be.
public struct GenerationOptions: Sendable, Equatable, Codable {
    /// How tokens are chosen.
    public var samplingMode: SamplingMode?
    /// Sampling temperature (`nil`: 1 for random modes).
    public var temperature: Double?
    /// The most tokens the response may have. `nil` (the default) sets no limit: the
    /// response runs until the model writes its end marker or the context window fills,
    /// which a synthetic model rarely does first, so set a limit for benchmarks.
    public var maximumResponseTokens: Int?
    /// Whether the model may, must or must not call a tool (`nil`: the profile's choice, else `.allowed`).
    public var toolCallingMode: ToolCallingMode?

    /// Options; every field defaults to the session's or the profile's choice.
    public init(samplingMode: SamplingMode? = nil, temperature: Double? = nil, maximumResponseTokens: Int? = nil,
                toolCallingMode: ToolCallingMode? = nil) {
        self.samplingMode = samplingMode
        self.temperature = temperature
        self.maximumResponseTokens = maximumResponseTokens
        self.toolCallingMode = toolCallingMode
    }

    /// Options with the iOS 26 spelling of the sampling mode.
    @available(*, deprecated, renamed: "init(samplingMode:temperature:maximumResponseTokens:toolCallingMode:)")
    public init(sampling: SamplingMode?, temperature: Double? = nil, maximumResponseTokens: Int? = nil) {
        self.init(samplingMode: sampling, temperature: temperature, maximumResponseTokens: maximumResponseTokens)
    }

    /// The iOS 26 name of ``samplingMode``.
    @available(*, deprecated, renamed: "samplingMode")
    public var sampling: SamplingMode? {
        get { samplingMode }
        set { samplingMode = newValue }
    }

    /// How the next token is chosen.
    public struct SamplingMode: Sendable, Equatable, Codable {
        enum Kind: Sendable, Equatable, Codable {
            case greedy
            case top(Int)
            case probabilityThreshold(Double)
        }

        let kind: Kind
        let seed: UInt64?

        /// Always the most likely token.
        public static let greedy = SamplingMode(kind: .greedy, seed: nil)

        /// A draw among the `k` most likely tokens.
        public static func random(top k: Int, seed: UInt64? = nil) -> SamplingMode {
            SamplingMode(kind: .top(k), seed: seed)
        }

        /// A draw from the smallest set of tokens whose probability exceeds `threshold`.
        public static func random(probabilityThreshold threshold: Double, seed: UInt64? = nil) -> SamplingMode {
            SamplingMode(kind: .probabilityThreshold(threshold), seed: seed)
        }
    }
}
