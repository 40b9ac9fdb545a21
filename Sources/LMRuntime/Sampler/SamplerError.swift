/// Why a sampler could not be built.
public enum SamplerError: Error, Equatable, CustomStringConvertible {
    /// A parameter is outside its range.
    case invalidParameter(name: String, value: Double, allowed: String)

    /// A sentence naming the parameter.
    public var description: String {
        switch self {
        case let .invalidParameter(name, value, allowed): "sampling \(name) \(value) is outside \(allowed)"
        }
    }
}
