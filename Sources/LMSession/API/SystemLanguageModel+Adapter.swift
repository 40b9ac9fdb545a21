import Foundation
import LMRuntime

extension SystemLanguageModel {
    /// Specializes a model with a low-rank (LoRA) adapter, in FoundationModels' shape.
    ///
    /// The adapter's factors are merged into a copy of the base model's float32 weights when the
    /// model loads (``LMRuntime/ModelWeights/merging(_:memoryLimit:)``), so requests run at the base
    /// model's speed and the merged model holds its own copy of the weights. An adapter is made for
    /// one base model (its ``LMRuntime/LowRankAdapter/baseFingerprint``); loading it onto another
    /// makes the model unavailable with ``LMRuntime/ModelLoadError/incompatibleAdapter(name:baseFingerprint:modelFingerprint:)``.
    ///
    /// For the KV cache, an adapted model is another model: its fingerprint differs from the
    /// base's, so nothing cached by base-model sessions (in memory or in a shared disk directory)
    /// is reused, and switching a feature between adapters recomputes its whole prompt once per
    /// adapter.
    ///
    /// Adapters live as `<identifier>.gguf` files in ``directory``, where an identifier is
    /// `fmadapter-<name>-<version>`; ``init(name:)`` picks the newest one made for the default
    /// model. The file format is described at ``LMRuntime/LowRankAdapter``; `kvbench adapter`
    /// writes a synthetic one.
    public struct Adapter: Sendable {
        /// The adapter's factors and metadata.
        public let lowRank: LowRankAdapter

        /// An adapter from its file.
        /// - Throws: ``AssetError/invalidAsset(_:)`` naming what is wrong with the file.
        public init(fileURL: URL) throws {
            do { lowRank = try LowRankAdapter(contentsOf: fileURL) } catch {
                throw AssetError.invalidAsset(.init(debugDescription: "\(error)"))
            }
        }

        /// The newest adapter called `name` in ``directory`` that was made for
        /// ``SystemLanguageModel/default`` (loading that model to find out).
        /// - Throws: ``AssetError/invalidAdapterName(_:)`` unless `name` is letters, digits and
        ///   underscores; ``AssetError/compatibleAdapterNotFound(_:)`` when no file fits;
        ///   ``AssetError/invalidAsset(_:)`` when the chosen file is malformed.
        public init(name: String) throws {
            try self.init(name: name, in: Self.directory, for: .default)
        }

        /// The newest adapter called `name` in `directory` made for `model` (see ``init(name:)``).
        public init(name: String, in directory: URL, for model: SystemLanguageModel) throws {
            guard Self.isValidName(name) else {
                throw AssetError.invalidAdapterName(.init(debugDescription: "'\(name)' is not letters, digits and underscores"))
            }
            guard let identifier = Self.compatibleAdapterIdentifiers(name: name, in: directory, for: model).first else {
                throw AssetError.compatibleAdapterNotFound(.init(
                    debugDescription: "no fmadapter-\(name)-*.gguf in \(directory.path) was made for the model's weights"))
            }
            try self.init(fileURL: directory.appendingPathComponent(identifier + ".gguf"))
        }

        /// An adapter already in memory (``LMRuntime/LowRankAdapter/random(for:rank:alpha:projections:layers:strength:seed:name:creatorDefinedMetadata:)``
        /// makes synthetic ones).
        public init(_ adapter: LowRankAdapter) { lowRank = adapter }

        /// Prepares the adapter: nothing to do here (the merge happens when the model loads and
        /// there are no draft models); kept so FoundationModels code compiles unchanged.
        public func compile() async throws {}

        /// The creator's metadata from the file (`kvsession.adapter.creator_defined_metadata`).
        public var creatorDefinedMetadata: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(lowRank.creatorDefinedMetadata.utf8))) as? [String: Any] ?? [:]
        }

        /// Where ``init(name:)`` looks: `$KVSESSION_ADAPTER_DIRECTORY`, else `KVSession/Adapters`
        /// in the user's caches directory.
        public static var directory: URL {
            if let path = ProcessInfo.processInfo.environment["KVSESSION_ADAPTER_DIRECTORY"], !path.isEmpty {
                return URL(fileURLWithPath: path, isDirectory: true)
            }
            let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
                ?? FileManager.default.temporaryDirectory
            return caches.appendingPathComponent("KVSession/Adapters", isDirectory: true)
        }

        /// The identifiers of the adapters called `name` in ``directory`` made for
        /// ``SystemLanguageModel/default``, newest version first.
        public static func compatibleAdapterIdentifiers(name: String) -> [String] {
            compatibleAdapterIdentifiers(name: name, in: directory, for: .default)
        }

        /// The identifiers of the adapters called `name` in `directory` made for `model`
        /// (whose files read as adapters and record its base fingerprint), newest version first;
        /// empty when the model cannot load.
        public static func compatibleAdapterIdentifiers(name: String, in directory: URL, for model: SystemLanguageModel) -> [String] {
            guard isValidName(name), let base = try? model.baseFingerprint() else { return [] }
            return adapterFiles(in: directory)
                .filter { $0.identifier.hasPrefix("fmadapter-\(name)-") && (try? LowRankAdapter(contentsOf: $0.url))?.baseFingerprint == base }
                .map(\.identifier)
                .sorted(by: >)
        }

        /// Removes the adapter files in ``directory`` made for other weights than
        /// ``SystemLanguageModel/default``'s.
        public static func removeObsoleteAdapters() throws {
            try removeObsoleteAdapters(in: directory, for: .default)
        }

        /// Removes the `fmadapter-*.gguf` files in `directory` that read as adapters made for other
        /// weights than `model`'s. Files that do not read as adapters are left alone.
        /// - Throws: the model's load error (nothing is removed then), or the file system's.
        public static func removeObsoleteAdapters(in directory: URL, for model: SystemLanguageModel) throws {
            let base = try model.baseFingerprint()
            for file in adapterFiles(in: directory) {
                guard let adapter = try? LowRankAdapter(contentsOf: file.url), adapter.baseFingerprint != base else { continue }
                try FileManager.default.removeItem(at: file.url)
            }
        }

        private static func adapterFiles(in directory: URL) -> [(identifier: String, url: URL)] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            return names.filter { $0.hasPrefix("fmadapter-") && $0.hasSuffix(".gguf") }
                .map { (String($0.dropLast(5)), directory.appendingPathComponent($0)) }
        }

        /// Whether `name` can name an adapter: letters, digits and underscores (ASCII).
        package static func isValidName(_ name: String) -> Bool {
            !name.isEmpty && name.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_") }
        }
    }

    /// The bundled `base` model with `adapter` merged into its weights.
    public convenience init(adapter: Adapter, guardrails: Guardrails = .default) {
        self.init(named: "base", adapter: adapter)
    }
}
