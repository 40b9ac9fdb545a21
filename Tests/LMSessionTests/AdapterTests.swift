import Foundation
@testable import LMSession
import LMRuntime
import LMTestSupport
import Testing

/// `SystemLanguageModel.Adapter`: an adapted model runs the merged weights and is, for the KV
/// cache, another model; adapters are found by name, and bad files are typed errors.
struct AdapterTests {
    static let instructions = "You are a packing assistant. List what to bring, briefly."

    static func tinyWeights() throws -> ModelWeights { try tinyModel.loaded().weights }

    static func adapter(seed: UInt64, for weights: ModelWeights? = nil, metadata: String = "{}") throws -> SystemLanguageModel.Adapter {
        SystemLanguageModel.Adapter(LowRankAdapter.random(for: try weights ?? tinyWeights(), rank: 4, seed: seed,
                                                          name: "demo", creatorDefinedMetadata: metadata))
    }

    @Test func adaptedModel_runsTheMergedWeightsAndSharesNoKVWithItsBase() async throws {
        let directory = Fixtures.temporaryFile("kv-adapter")
        defer { try? FileManager.default.removeItem(at: directory) }
        let adapter = try Self.adapter(seed: 5)
        func model(_ adapter: SystemLanguageModel.Adapter?) -> SystemLanguageModel {
            SystemLanguageModel(named: "tiny", adapter: adapter, prefixStore: .persistent(in: directory))
        }
        // The base model's sessions fill the shared directory; the adapted model, opened after, reuses none of it.
        let base = model(nil)
        let first = LanguageModelSession(model: base, instructions: Self.instructions)
        _ = try await first.respond(to: "A weekend hike?", options: short())
        try base.loaded().prefixStore.flush()
        let adapted = model(adapter)
        let merged = try Self.tinyWeights().merging(adapter.lowRank)
        #expect(try adapted.loaded().prefixStore.fingerprint == ModelFingerprint(merged))
        #expect(try adapted.loaded().prefixStore.fingerprint != base.loaded().prefixStore.fingerprint)
        #expect(try adapted.baseFingerprint() == base.baseFingerprint() && base.baseFingerprint() == adapter.lowRank.baseFingerprint)
        let session = LanguageModelSession(model: adapted, instructions: Self.instructions)
        let response = try await session.respond(to: "A weekend hike?", options: short())
        #expect(response.usage.input.cachedTokenCount == 0 && response.invalidation?.reason == .emptyCache)
        try await session.expectCacheExact()
        try adapted.loaded().prefixStore.flush()

        // A relaunch: each model restores its own rows from the same directory (the instructions,
        // the `<|user|>` marker and the prompts' shared first word).
        let agreeing = zip(tokenizer.encode("A beach day?", bos: false), tokenizer.encode("A weekend hike?", bos: false))
            .prefix { $0 == $1 }.count
        let restorable = Count.instructions([Self.instructions]) + 1 + agreeing
        for relaunched in [model(adapter), model(nil)] {
            let again = LanguageModelSession(model: relaunched, instructions: Self.instructions)
            let r = try await again.respond(to: "A beach day?", options: short())
            #expect(r.usage.input.cachedFromDiskCount == restorable && r.usage.input.cachedTokenCount == restorable)
            try await again.expectCacheExact()
        }
    }

    @Test func adaptedModel_mergesBeforeRoundingToHalfs() throws {
        let adapter = try Self.adapter(seed: 6)
        let halfs = SystemLanguageModel(named: "tiny", adapter: adapter, weightPrecision: .f16, prefixStore: .memoryOnly(memoryByteLimit: 0))
        let expected = try Self.tinyWeights().merging(adapter.lowRank).converted(to: .f16)
        #expect(try halfs.loaded().prefixStore.fingerprint == ModelFingerprint(expected))
        #expect(try halfs.baseFingerprint() == adapter.lowRank.baseFingerprint)
    }

    @Test func adapterForOtherWeights_makesTheModelUnavailable() async throws {
        let foreign = try Self.adapter(seed: 1, for: Fixtures.tinyWeights())
        let model = SystemLanguageModel(named: "tiny", adapter: foreign, prefixStore: .memoryOnly(memoryByteLimit: 0))
        guard case .unavailable(.modelFilesInvalid(.incompatibleAdapter(name: "demo", _, _))) = model.availability else {
            Issue.record("\(model.availability)"); return
        }
        let session = LanguageModelSession(model: model)
        await #expect(throws: SystemLanguageModel.Error.self) { try await session.respond(to: "Hi") }
        #expect(session.transcript.count == 1)   // the instructions entry alone: the prompt was not appended
    }

    @Test func adapterByName_picksTheNewestCompatibleFile() async throws {
        let directory = Fixtures.temporaryFile("adapters")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func write(_ adapter: SystemLanguageModel.Adapter, _ identifier: String) throws {
            try adapter.lowRank.ggufData().write(to: directory.appendingPathComponent(identifier + ".gguf"))
        }
        let older = try Self.adapter(seed: 1), newer = try Self.adapter(seed: 2, metadata: #"{"task":"packing","epochs":3}"#)
        try write(older, "fmadapter-demo-1")
        try write(newer, "fmadapter-demo-2")
        try write(try Self.adapter(seed: 3), "fmadapter-other-1")
        try write(try Self.adapter(seed: 4, for: Fixtures.tinyWeights()), "fmadapter-demo-9")   // another base model
        try Data("not an adapter".utf8).write(to: directory.appendingPathComponent("fmadapter-demo-8.gguf"))

        let model = SystemLanguageModel(named: "tiny", prefixStore: .memoryOnly(memoryByteLimit: 0))
        typealias Adapter = SystemLanguageModel.Adapter
        #expect(Adapter.compatibleAdapterIdentifiers(name: "demo", in: directory, for: model) == ["fmadapter-demo-2", "fmadapter-demo-1"])
        let found = try Adapter(name: "demo", in: directory, for: model)
        #expect(found.lowRank.identity == newer.lowRank.identity)
        #expect(found.creatorDefinedMetadata["task"] as? String == "packing" && found.creatorDefinedMetadata["epochs"] as? Int == 3)
        try await found.compile()

        #expect { try Adapter(name: "de mo", in: directory, for: model) } throws: { error in
            if case .invalidAdapterName = error as? Adapter.AssetError { true } else { false }
        }
        #expect { try Adapter(name: "missing", in: directory, for: model) } throws: { error in
            if case .compatibleAdapterNotFound = error as? Adapter.AssetError { true } else { false }
        }
        #expect { try Adapter(fileURL: directory.appendingPathComponent("fmadapter-demo-8.gguf")) } throws: { error in
            if case let .invalidAsset(context) = error as? Adapter.AssetError { context.debugDescription.contains("GGUF") } else { false }
        }

        // Only the readable adapter made for other weights goes; the unreadable file stays.
        try Adapter.removeObsoleteAdapters(in: directory, for: model)
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(left == ["fmadapter-demo-1.gguf", "fmadapter-demo-2.gguf", "fmadapter-demo-8.gguf", "fmadapter-other-1.gguf"])
    }

    @Test func foundationModelsShapes_compile() throws {
        let adapter = try Self.adapter(seed: 7)
        let model = SystemLanguageModel(adapter: adapter, guardrails: .default)   // not loaded: `base` would take a while
        _ = LanguageModelSession(model: model, instructions: Self.instructions)
        let error: Error = SystemLanguageModel.Adapter.AssetError.invalidAsset(.init(debugDescription: "missing tensor"))
        #expect(error.localizedDescription.contains("missing tensor"))
        #expect(SystemLanguageModel.Adapter.directory.path.hasSuffix("KVSession/Adapters")
            || ProcessInfo.processInfo.environment["KVSESSION_ADAPTER_DIRECTORY"] != nil)
    }
}
