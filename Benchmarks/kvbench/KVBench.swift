import ArgumentParser

/// `kvbench`: measures how session structure decides KV-cache reuse, on a real transformer.
@main
struct KVBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvbench",
        abstract: "Run a Llama-style transformer on OpenBLAS and measure its kernels and KV-cache reuse.",
        subcommands: [Scenarios.self, Responses.self, Kernels.self, Guided.self, Generate.self, Convert.self, Adapter.self, TrainTokenizer.self],
        defaultSubcommand: Scenarios.self
    )
}
