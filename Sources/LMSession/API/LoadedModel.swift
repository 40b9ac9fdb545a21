import Foundation
import LMRuntime
import Synchronization

/// A loaded model: weights, tokenizer and an identity, shared by every session that uses it.
public final class LoadedModel: Sendable {
    /// The weights.
    public let weights: ModelWeights
    /// The tokenizer.
    public let tokenizer: Tokenizer
    /// A name for reports (config name or checkpoint file).
    public let name: String
    /// The one transformer (and its scratch) every session on this model runs on: passes are
    /// serialised process-wide anyway, so per-session scratch would only cost memory.
    let transformer: Transformer
    /// K/V of prefixes shared by every session on this model (and, with a directory, across
    /// launches): a session whose rendered tokens begin with a stored prefix copies its rows
    /// instead of computing them.
    public let prefixStore: PrefixStore
    /// Compiled schemas and the vocabulary view guided generation uses.
    let grammars: GrammarCache
    /// Token ids of texts its sessions rendered before.
    let texts: TextTokenCache

    /// Bundles weights and a tokenizer.
    /// - Parameters:
    ///   - weights: the model.
    ///   - tokenizer: its tokenizer.
    ///   - name: a name for reports (default: the config's).
    ///   - prefixStore: limits and the optional directory of the shared prefix store (default:
    ///     memory only, or persistent where `KVSESSION_KV_CACHE_DIR` names a directory);
    ///     `.memoryOnly(memoryByteLimit: 0)` turns sharing off.
    /// - Throws: ``LMRuntime/ModelLoadError/vocabularyMismatch(modelVocabSize:tokenizerVocabSize:)``
    ///   when they disagree.
    public init(weights: ModelWeights, tokenizer: Tokenizer, name: String? = nil,
                prefixStore: PrefixStore.Configuration = .standard) throws {
        guard weights.config.vocabSize == tokenizer.vocabSize else {
            throw ModelLoadError.vocabularyMismatch(modelVocabSize: weights.config.vocabSize,
                                                    tokenizerVocabSize: tokenizer.vocabSize)
        }
        self.weights = weights
        self.tokenizer = tokenizer
        self.name = name ?? weights.config.name
        transformer = Transformer(weights: weights)
        grammars = GrammarCache(tokenizer: tokenizer)
        texts = TextTokenCache(tokenizer: tokenizer)
        self.prefixStore = PrefixStore(weights: weights, configuration: prefixStore)
    }
}
