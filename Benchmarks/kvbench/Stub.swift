import ArgumentParser
extension KVBench { struct Kernels: AsyncParsableCommand { func run() async throws {} }
struct Generate: AsyncParsableCommand { func run() async throws {} }
struct TrainTokenizer: AsyncParsableCommand { func run() async throws {} } }
