import Foundation
import LMRuntime
import ResponseCache

/// A response as the response cache stores it.
public struct CachedResponse: Codable, Sendable, Equatable {
    /// The response text.
    public var content: String
    /// The generated token ids.
    public var tokenIDs: [Int]

    /// A cached response.
    public init(content: String, tokenIDs: [Int]) {
        self.content = content
        self.tokenIDs = tokenIDs
    }
}

extension LanguageModelSession {
    /// The cache key of a request: a SHA-256 over the model's identity and configuration, the
    /// exact tokens the request would render (instructions, tools, history after the stateless
    /// transform, the prompt), the generation options and the profile's reasoning level (when it
    /// has one), plus a data fingerprint and tags.
    public func cacheKey(for prompt: Prompt, options: GenerationOptions = GenerationOptions(),
                         dataFingerprint: String? = nil, tags: Set<String> = [], schemaVersion: Int = 1) async throws -> CacheKey {
        let engine = try engine()
        let plan = try await plan(.init(text: prompt.text), runHooks: false, renderer: engine.renderer)
        let profile = plan.profile, tokens = plan.rendered.tokens
        let config = engine.model.weights.config
        let configJSON = String(decoding: try JSONEncoder.sorted.encode(config), as: UTF8.self)
        let merged = GenerationOptions(samplingMode: options.samplingMode ?? profile.options.samplingMode,
                                       temperature: options.temperature ?? profile.options.temperature,
                                       maximumResponseTokens: options.maximumResponseTokens ?? profile.options.maximumResponseTokens)
        let reasoning = profile.reasoningLevel.map { ["reasoning:\($0)"] } ?? []   // none: the keys made before reasoning
        return CacheKey(parts: ["model:\(engine.model.name)", "config:\(configJSON)",
                                "tokens:\(tokens.map(String.init).joined(separator: ","))", "options:\(merged)"] + reasoning,
                        dataFingerprint: dataFingerprint, tags: tags, schemaVersion: schemaVersion)
    }

    /// Responds through a response cache: under `policy`, a valid cached response skips
    /// generation entirely (the prompt and the cached response are still appended to the
    /// transcript); otherwise the session responds and the result is stored.
    /// - Returns: the final answer (for ``ResponseCache/CachePolicy/cacheThenGenerate``, the fresh one);
    ///   use ``ResponseCache/ResponseCache/responses(for:policy:generate:)`` with ``cacheKey(for:options:dataFingerprint:tags:schemaVersion:)``
    ///   to see both answers of stale-while-revalidate.
    public func respond(to prompt: Prompt, options: GenerationOptions = GenerationOptions(),
                        cache: ResponseCache<CachedResponse>, policy: CachePolicy = .cacheElseGenerate,
                        dataFingerprint: String? = nil, tags: Set<String> = []) async throws -> CacheAnswer<CachedResponse> {
        let key = try await cacheKey(for: prompt, options: options, dataFingerprint: dataFingerprint, tags: tags)
        let answer = try await cache.value(for: key, policy: policy) { [self] in
            let response = try await respond(to: prompt, options: options)
            guard case let .response(r) = response.transcriptEntries.last else { return CachedResponse(content: response.content, tokenIDs: []) }
            return CachedResponse(content: r.text, tokenIDs: r.tokenIDs)
        }
        if answer.isCached, let value = answer.value {
            // The key holds the tokens this model's tokenizer rendered, so the cached ids are in it too.
            let response = Transcript.Response(text: value.content, tokenIDs: value.tokenIDs, assetIDs: [try engine().renderer.assetID])
            changing(\.transcript) { $0.history += [.prompt(.init(text: prompt.text, options: options)), .response(response)] }
        }
        return answer
    }
}

extension JSONEncoder {
    static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}
