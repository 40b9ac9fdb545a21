import Foundation
import LMRuntime

/// The machine a run measured: what a figure needs beside it to mean anything.
struct MachineInfo: Encodable {
    let cpu: String
    let cores: Int
    let vector_extensions: [String]
    let blas_core_type: String
    /// The kernels OpenBLAS chose itself where the runtime replaced them (its generic `Prescott`).
    let blas_core_type_replaced: String?
    let threads: Int
    let os: String

    /// This machine, read from `/proc/cpuinfo` where it exists.
    static var current: MachineInfo {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        func field(_ name: String) -> String? {
            cpuinfo.split(separator: "\n").first { $0.hasPrefix(name) }
                .flatMap { $0.split(separator: ":", maxSplits: 1).last }.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let flags = Set((field("flags") ?? "").split(separator: " ").map(String.init))
        let wanted = ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "amx_tile"]
        let zen = LMRuntime.Kernels.amdZenGeneration
        return MachineInfo(cpu: (field("model name") ?? "unknown CPU") + (zen > 0 ? " (Zen \(zen))" : ""), cores: ProcessInfo.processInfo.activeProcessorCount,
                           vector_extensions: wanted.filter(flags.contains), blas_core_type: LMRuntime.Kernels.blasCoreType,
                           blas_core_type_replaced: LMRuntime.Kernels.blasCoreTypeReplaced,
                           threads: LMRuntime.Kernels.threadCount, os: ProcessInfo.processInfo.operatingSystemVersionString)
    }

    /// One line: CPU, cores, extensions, OpenBLAS kernels.
    var summary: String {
        "\(cpu), \(cores) cores (\(vector_extensions.joined(separator: " "))), OpenBLAS core type \(blas_core_type)\(blas_core_type_replaced.map { " (replacing \($0))" } ?? ""), \(threads) runtime threads"
    }
}
