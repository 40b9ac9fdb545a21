extension LanguageModelSession {
    /// Responds with a value of `type`, decoded under its schema: every token is constrained so
    /// the JSON is always a valid, complete instance that satisfies every guide, within
    /// `options.maximumResponseTokens` when set.
    /// - Parameters:
    ///   - includeSchemaInPrompt: iOS 26's spelling of `contextOptions.includeSchemaInPrompt`;
    ///     when given, it wins. The schema's text follows the prompt unless one of them is `false`
    ///     (pass `false` when the instructions or an earlier prompt already describe it).
    ///   - contextOptions: how the request is put to the model (see ``ContextOptions``).
    ///   - metadata: kept on the request's prompt entry (``Transcript/Prompt/metadata``); it
    ///     renders nothing.
    /// - Throws: ``LanguageModelError/unsupportedGenerationGuide(_:)`` for a schema the decoder cannot
    ///   follow, ``LanguageModelError/invalidOptions(_:)`` when the budget cannot hold the
    ///   shortest valid value, and the errors of ``respond(to:options:contextOptions:metadata:)-(Prompt,_,_,_)``.
    public func respond<Content: Generable>(to prompt: Prompt, generating type: Content.Type = Content.self,
                                            includeSchemaInPrompt: Bool? = nil, options: GenerationOptions = GenerationOptions(),
                                            contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                                            metadata: [String: any ConvertibleToGeneratedContent] = [:]) async throws -> Response<Content> {
        let format = Transcript.ResponseFormat(type: type, isIncludedInPrompt: Self.includesSchema(includeSchemaInPrompt, contextOptions))
        let (response, raw) = try await perform(prompt, options: options, format: format, reasoningLevel: contextOptions.reasoningLevel,
                                                metadata: Self.content(metadata))
        return try response.converted(raw)
    }

    /// Responds with a value of `type` to a prompt given as a string.
    public func respond<Content: Generable>(to prompt: String, generating type: Content.Type = Content.self,
                                            includeSchemaInPrompt: Bool? = nil, options: GenerationOptions = GenerationOptions(),
                                            contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                                            metadata: [String: any ConvertibleToGeneratedContent] = [:]) async throws -> Response<Content> {
        try await respond(to: Prompt(prompt), generating: type, includeSchemaInPrompt: includeSchemaInPrompt, options: options,
                          contextOptions: contextOptions, metadata: metadata)
    }

    /// Responds with content following a schema built at run time.
    public func respond(to prompt: Prompt, schema: GenerationSchema, includeSchemaInPrompt: Bool? = nil,
                        options: GenerationOptions = GenerationOptions(),
                        contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                        metadata: [String: any ConvertibleToGeneratedContent] = [:]) async throws -> Response<GeneratedContent> {
        let format = Transcript.ResponseFormat(schema: schema, isIncludedInPrompt: Self.includesSchema(includeSchemaInPrompt, contextOptions))
        let (response, raw) = try await perform(prompt, options: options, format: format, reasoningLevel: contextOptions.reasoningLevel,
                                                metadata: Self.content(metadata))
        return try response.converted(raw)
    }

    /// Responds with content following `schema` to a prompt given as a string.
    public func respond(to prompt: String, schema: GenerationSchema, includeSchemaInPrompt: Bool? = nil,
                        options: GenerationOptions = GenerationOptions(),
                        contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                        metadata: [String: any ConvertibleToGeneratedContent] = [:]) async throws -> Response<GeneratedContent> {
        try await respond(to: Prompt(prompt), schema: schema, includeSchemaInPrompt: includeSchemaInPrompt, options: options,
                          contextOptions: contextOptions, metadata: metadata)
    }

    /// Responds to a prompt built with ``PromptBuilder``.
    public func respond(options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(),
                        metadata: [String: any ConvertibleToGeneratedContent] = [:],
                        @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<String> {
        try await respond(to: try prompt(), options: options, contextOptions: contextOptions, metadata: metadata)
    }

    /// Responds with a value of `type` to a prompt built with ``PromptBuilder``.
    public func respond<Content: Generable>(generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool? = nil,
                                            options: GenerationOptions = GenerationOptions(),
                                            contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                                            metadata: [String: any ConvertibleToGeneratedContent] = [:],
                                            @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<Content> {
        try await respond(to: try prompt(), generating: type, includeSchemaInPrompt: includeSchemaInPrompt, options: options,
                          contextOptions: contextOptions, metadata: metadata)
    }

    /// Responds with content following `schema` to a prompt built with ``PromptBuilder``.
    public func respond(schema: GenerationSchema, includeSchemaInPrompt: Bool? = nil, options: GenerationOptions = GenerationOptions(),
                        contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                        metadata: [String: any ConvertibleToGeneratedContent] = [:],
                        @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<GeneratedContent> {
        try await respond(to: try prompt(), schema: schema, includeSchemaInPrompt: includeSchemaInPrompt, options: options,
                          contextOptions: contextOptions, metadata: metadata)
    }

    /// Streams a value of `type` as it is generated: each snapshot's `content` is the
    /// ``Generable/PartiallyGenerated`` form (properties not generated yet are `nil`).
    public func streamResponse<Content: Generable>(to prompt: Prompt, generating type: Content.Type = Content.self,
                                                   includeSchemaInPrompt: Bool? = nil, options: GenerationOptions = GenerationOptions(),
                                                   contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                                                   metadata: [String: any ConvertibleToGeneratedContent] = [:]) -> ResponseStream<Content> {
        stream(prompt, options: options, format: .init(type: type, isIncludedInPrompt: Self.includesSchema(includeSchemaInPrompt, contextOptions)),
               reasoningLevel: contextOptions.reasoningLevel, metadata: Self.content(metadata))
    }

    /// Streams a value of `type` for a prompt given as a string.
    public func streamResponse<Content: Generable>(to prompt: String, generating type: Content.Type = Content.self,
                                                   includeSchemaInPrompt: Bool? = nil, options: GenerationOptions = GenerationOptions(),
                                                   contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                                                   metadata: [String: any ConvertibleToGeneratedContent] = [:]) -> ResponseStream<Content> {
        streamResponse(to: Prompt(prompt), generating: type, includeSchemaInPrompt: includeSchemaInPrompt, options: options,
                       contextOptions: contextOptions, metadata: metadata)
    }

    /// Streams content following `schema`.
    public func streamResponse(to prompt: Prompt, schema: GenerationSchema, includeSchemaInPrompt: Bool? = nil,
                               options: GenerationOptions = GenerationOptions(),
                               contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                               metadata: [String: any ConvertibleToGeneratedContent] = [:]) -> ResponseStream<GeneratedContent> {
        stream(prompt, options: options, format: .init(schema: schema, isIncludedInPrompt: Self.includesSchema(includeSchemaInPrompt, contextOptions)),
               reasoningLevel: contextOptions.reasoningLevel, metadata: Self.content(metadata))
    }

    /// Streams content following `schema`, for a prompt given as a string.
    public func streamResponse(to prompt: String, schema: GenerationSchema, includeSchemaInPrompt: Bool? = nil,
                               options: GenerationOptions = GenerationOptions(),
                               contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                               metadata: [String: any ConvertibleToGeneratedContent] = [:]) -> ResponseStream<GeneratedContent> {
        streamResponse(to: Prompt(prompt), schema: schema, includeSchemaInPrompt: includeSchemaInPrompt, options: options,
                       contextOptions: contextOptions, metadata: metadata)
    }

    /// Streams the response to a prompt built with ``PromptBuilder``.
    public func streamResponse(options: GenerationOptions = GenerationOptions(), contextOptions: ContextOptions = ContextOptions(),
                               metadata: [String: any ConvertibleToGeneratedContent] = [:],
                               @PromptBuilder prompt: () throws -> Prompt) rethrows -> ResponseStream<String> {
        streamResponse(to: try prompt(), options: options, contextOptions: contextOptions, metadata: metadata)
    }

    /// Streams a value of `type` for a prompt built with ``PromptBuilder``.
    public func streamResponse<Content: Generable>(generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool? = nil,
                                                   options: GenerationOptions = GenerationOptions(),
                                                   contextOptions: ContextOptions = ContextOptions(includeSchemaInPrompt: true),
                                                   metadata: [String: any ConvertibleToGeneratedContent] = [:],
                                                   @PromptBuilder prompt: () throws -> Prompt) rethrows -> ResponseStream<Content> {
        streamResponse(to: try prompt(), generating: type, includeSchemaInPrompt: includeSchemaInPrompt, options: options,
                       contextOptions: contextOptions, metadata: metadata)
    }

    /// Whether a guided request renders its schema: the iOS 26 argument when given, else the
    /// context options' choice, else yes.
    static func includesSchema(_ flag: Bool?, _ context: ContextOptions) -> Bool {
        flag ?? context.includeSchemaInPrompt ?? true
    }

    /// Request metadata as the transcript keeps it.
    static func content(_ metadata: [String: any ConvertibleToGeneratedContent]) -> [String: GeneratedContent] {
        metadata.mapValues(\.generatedContent)
    }
}
