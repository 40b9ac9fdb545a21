import ArgumentParser
import Foundation
import LMRuntime

extension KVBench {
    /// `kvbench train-tokenizer`: builds the bundled BPE vocabulary from the repository's English text.
    struct TrainTokenizer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "train-tokenizer",
            abstract: "Train a byte-fallback BPE tokenizer (llama2.c tokenizer.bin format) from .txt files.")

        @Option(name: .long, help: "A folder of .txt files (or one .txt file) to learn from.")
        var corpus: String = "Models/corpus"

        @Option(name: .long, help: "Vocabulary size, special and byte tokens included.")
        var vocabSize: Int = 4096

        @Option(name: .long, help: "Where to write tokenizer.bin.")
        var output: String = "Models/tokenizer.bin"

        func validate() throws {
            if vocabSize < 300 || vocabSize > 65536 {
                throw ValidationError("--vocab-size must be in 300...65536, got \(vocabSize).")
            }
        }

        func run() async throws {
            let texts = try Self.readCorpus(URL(fileURLWithPath: corpus))
            progress("training on \(texts.count) files, \(texts.map(\.utf8.count).reduce(0, +)) bytes…")
            let tokenizer = try BPETrainer(vocabSize: vocabSize, reservedPieces: ControlPieces.all).train(on: texts)
            try tokenizer.serialized().write(to: URL(fileURLWithPath: output), options: .atomic)
            let characters = texts.map(\.count).reduce(0, +)
            let tokens = texts.map { tokenizer.encode($0, bos: false).count }.reduce(0, +)
            print("wrote \(output): \(tokenizer.vocabSize) tokens; \(String(format: "%.2f", Double(characters) / Double(tokens))) characters per token on the corpus")
        }

        static func readCorpus(_ url: URL) throws -> [String] {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
                throw ValidationError("no corpus at \(url.path)")
            }
            let files = isDirectory.boolValue
                ? try FileManager.default.contentsOfDirectory(atPath: url.path).filter { $0.hasSuffix(".txt") }.sorted()
                    .map { url.appendingPathComponent($0) }
                : [url]
            return try files.map { try String(contentsOf: $0, encoding: .utf8) }
        }
    }
}
