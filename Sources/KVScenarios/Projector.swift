import Foundation
import LMRuntime

/// A device's compute and memory figures, for projecting latency (Models/devices/profiles.json).
public struct DeviceProfile: Codable, Sendable, Equatable {
    /// Short name used as a column header.
    public var name: String
    /// What the figures describe.
    public var description: String
    /// Peak float throughput, GFLOP/s.
    public var peakGFLOPs: Double
    /// Peak memory bandwidth, GB/s.
    public var memoryBandwidthGBps: Double
    /// Fraction of the peak compute a well-tuned prefill reaches.
    public var computeEfficiency: Double
    /// Fraction of the peak bandwidth decoding reaches.
    public var bandwidthEfficiency: Double
    /// Where the figures come from.
    public var sources: [String]

    /// Loads the profiles from a JSON file (an array of profiles).
    public static func load(_ url: URL) throws -> [DeviceProfile] {
        try JSONDecoder().decode([DeviceProfile].self, from: Data(contentsOf: url))
    }
}

/// Projects time to first token from exact FLOP and byte counts.
///
/// Prefill of `computed` tokens after `cached` ones costs `forwardFLOPs` (projections,
/// causal attention, classifier) and streams the weights once plus the cached K/V rows;
/// it takes the longer of compute time and memory time. The first token then needs one
/// decode step (weights and all K/V rows streamed). Weights count at their precision's size
/// (``LMRuntime/ModelConfig/decodeWeightBytes``): f16 halves what both phases stream.
package struct Projector: Sendable {
    let config: ModelConfig
    let devices: [DeviceProfile]

    package init(config: ModelConfig, devices: [DeviceProfile]) {
        self.config = config
        self.devices = devices
    }

    /// Projected milliseconds to the first token per device, after `cached` reused tokens and
    /// `computed` new ones. Weight bytes follow the model's ``LMRuntime/WeightPrecision``.
    package func ttft(cached: Int, computed: Int) -> [String: Double] {
        var out: [String: Double] = [:]
        let kvBytesPerToken = Double(2 * config.layerCount * config.kvDim * 4)
        let weightBytes = Double(config.decodeWeightBytes)
        let flops = computed > 0 ? config.forwardFLOPs(cachedTokens: cached, newTokens: computed) : 0
        let prefillBytes = computed > 0 ? weightBytes + kvBytesPerToken * Double(cached + computed) : 0
        let decodeBytes = weightBytes + kvBytesPerToken * Double(cached + computed)
        for d in devices {
            let compute = flops / (d.peakGFLOPs * d.computeEfficiency * 1e9)
            let bandwidth = d.memoryBandwidthGBps * d.bandwidthEfficiency * 1e9
            let prefill = max(compute, prefillBytes / bandwidth)
            out[d.name] = (prefill + decodeBytes / bandwidth) * 1000
        }
        return out
    }
}
