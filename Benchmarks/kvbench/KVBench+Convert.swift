import ArgumentParser
import Foundation
import LMRuntime

extension KVBench {
    /// `kvbench convert`: a model between llama2.c checkpoint and GGUF, in either direction.
    struct Convert: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Convert a model (bundled, llama2.c checkpoint or GGUF) to GGUF or to a llama2.c checkpoint.",
            discussion: """
                The output's extension picks the format: .gguf writes the weights and the vocabulary in one file \
                (llama architecture, readable by llama.cpp); .bin writes a llama2.c checkpoint, and \
                --tokenizer-output its tokenizer.bin. Examples:
                  kvbench convert --checkpoint stories260K.bin --tokenizer tok512.bin --output stories260K.gguf
                  kvbench convert --gguf stories260K.gguf --output back.bin --tokenizer-output back-tok.bin
                """)

        @OptionGroup var options: ModelOptions

        @Option(name: .long, help: "The file to write: NAME.gguf or NAME.bin.")
        var output: String

        @Option(name: .long, help: "GGUF tensor encoding: f32, f16 or q8_0 (norms stay f32; q8_0 needs rows of 32, else f16).")
        var type: String?

        @Option(name: .long, help: "With a .bin output: also write the vocabulary as a llama2.c tokenizer.bin here.")
        var tokenizerOutput: String?

        static let types: [String: GGUFTensorType] = ["f32": .f32, "f16": .f16, "q8_0": .q8_0]

        private var writesGGUF: Bool { output.lowercased().hasSuffix(".gguf") }

        func validate() throws {
            try options.refuse([.threads, .seed, .precision], in: "convert")   // --tensor-type sets what is written
            guard writesGGUF || output.lowercased().hasSuffix(".bin") else {
                throw ValidationError("--output must end in .gguf or .bin, got '\(output)'.")
            }
            if let type, Self.types[type] == nil { throw ValidationError("--type must be f32, f16 or q8_0, got '\(type)'.") }
            if type != nil, !writesGGUF { throw ValidationError("--type applies to a .gguf output; a llama2.c checkpoint is f32.") }
            if tokenizerOutput != nil, writesGGUF { throw ValidationError("--tokenizer-output goes with a .bin output; a GGUF holds its vocabulary.") }
            if writesGGUF, options.checkpoint != nil, options.tokenizer == nil {
                throw ValidationError("a GGUF carries its vocabulary: give the checkpoint's --tokenizer.")
            }
        }

        func run() async throws {
            let (weights, tokenizer) = try options.loadModel(fallback: "base")
            let url = URL(fileURLWithPath: output)
            if writesGGUF {
                let tensorType = Self.types[type ?? "f32"]!
                try weights.checkRange(for: tensorType)   // refused before anything is written
                let data = try weights.ggufData(tokenizer: tokenizer, tensorType: tensorType)
                try data.write(to: url, options: .atomic)
                print("wrote \(output): GGUF v3, llama, \(weights.config.layerCount) layers, \(tokenizer.vocabSize) tokens, \(type ?? "f32"), \(data.count) bytes")
            } else {
                if tokenizerOutput != nil, tokenizer.isByteLevel {   // refused before anything is written
                    throw ValidationError("\(options.gguf ?? "the model")'s vocabulary is byte-level BPE; llama2.c's tokenizer.bin cannot hold its merges, so --tokenizer-output is refused.")
                }
                if tokenizerOutput != nil, !tokenizer.fitsTokenizerBin {
                    throw ValidationError("\(options.gguf ?? "the model")'s vocabulary has control tokens or byte pieces where llama2.c's layout has none; its tokenizer.bin could not keep them, so --tokenizer-output is refused.")
                }
                let data = try weights.checkpointData()
                try data.write(to: url, options: .atomic)
                print("wrote \(output): llama2.c checkpoint, \(data.count) bytes")
                if let tokenizerOutput {
                    try tokenizer.serialized().write(to: URL(fileURLWithPath: tokenizerOutput), options: .atomic)
                    print("wrote \(tokenizerOutput): \(tokenizer.vocabSize) tokens")
                }
            }
        }
    }
}
