extension LanguageModelSession {
    /// Responds with a value of `type`, decoded under its schema: every token is constrained so
    /// the JSON is always a valid, complete instance that satisfies every guide, within
    /// `options.maximumResponseTokens` when set.
    /// - Parameters:
    ///   - includeSchemaInPrompt: render the schema's text after the prompt (the default); pass
    ///     `false` when the instructions or an earlier prompt already describe it.
    /// - Throws: ``LanguageModelError/unsupportedSchema(_:)`` for a schema the decoder cannot
    ///   follow, ``LanguageModelError/invalidOptions(_:)`` when the budget cannot hold the
    ///   shortest valid value, and the errors of ``respond(to:options:)-(Prompt,_)``.
    public func respond<Content: Generable>(to prompt: Prompt, generating type: Content.Type = Content.self,
                                            includeSchemaInPrompt: Bool = true,
                                            options: GenerationOptions = GenerationOptions()) async throws -> Response<Content> {
        let format = Transcript.ResponseFormat(type: type, isIncludedInPrompt: includeSchemaInPrompt)
        let (response, raw) = try await perform(prompt, options: options, format: format)
        return try response.converted(raw)
    }

    /// Responds with a value of `type` to a prompt given as a string.
    public func respond<Content: Generable>(to prompt: String, generating type: Content.Type = Content.self,
                                            includeSchemaInPrompt: Bool = true,
                                            options: GenerationOptions = GenerationOptions()) async throws -> Response<Content> {
        try await respond(to: Prompt(prompt), generating: type, includeSchemaInPrompt: includeSchemaInPrompt, options: options)
    }

    /// Responds with content following a schema built at run time.
    public func respond(to prompt: Prompt, schema: GenerationSchema, includeSchemaInPrompt: Bool = true,
                        options: GenerationOptions = GenerationOptions()) async throws -> Response<GeneratedContent> {
        let format = Transcript.ResponseFormat(schema: schema, isIncludedInPrompt: includeSchemaInPrompt)
        let (response, raw) = try await perform(prompt, options: options, format: format)
        return try response.converted(raw)
    }

    /// Responds with content following `schema` to a prompt given as a string.
    public func respond(to prompt: String, schema: GenerationSchema, includeSchemaInPrompt: Bool = true,
                        options: GenerationOptions = GenerationOptions()) async throws -> Response<GeneratedContent> {
        try await respond(to: Prompt(prompt), schema: schema, includeSchemaInPrompt: includeSchemaInPrompt, options: options)
    }

    /// Responds to a prompt built with ``PromptBuilder``.
    public func respond(options: GenerationOptions = GenerationOptions(),
                        @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<String> {
        try await respond(to: try prompt(), options: options)
    }

    /// Responds with a value of `type` to a prompt built with ``PromptBuilder``.
    public func respond<Content: Generable>(generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool = true,
                                            options: GenerationOptions = GenerationOptions(),
                                            @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<Content> {
        try await respond(to: try prompt(), generating: type, includeSchemaInPrompt: includeSchemaInPrompt, options: options)
    }

    /// Responds with content following `schema` to a prompt built with ``PromptBuilder``.
    public func respond(schema: GenerationSchema, includeSchemaInPrompt: Bool = true, options: GenerationOptions = GenerationOptions(),
                        @PromptBuilder prompt: () throws -> Prompt) async throws -> Response<GeneratedContent> {
        try await respond(to: try prompt(), schema: schema, includeSchemaInPrompt: includeSchemaInPrompt, options: options)
    }

    /// Streams a value of `type` as it is generated: each snapshot's `content` is the
    /// ``Generable/PartiallyGenerated`` form (properties not generated yet are `nil`).
    public func streamResponse<Content: Generable>(to prompt: Prompt, generating type: Content.Type = Content.self,
                                                   includeSchemaInPrompt: Bool = true,
                                                   options: GenerationOptions = GenerationOptions()) -> ResponseStream<Content> {
        stream(prompt, options: options, format: .init(type: type, isIncludedInPrompt: includeSchemaInPrompt))
    }

    /// Streams a value of `type` for a prompt given as a string.
    public func streamResponse<Content: Generable>(to prompt: String, generating type: Content.Type = Content.self,
                                                   includeSchemaInPrompt: Bool = true,
                                                   options: GenerationOptions = GenerationOptions()) -> ResponseStream<Content> {
        streamResponse(to: Prompt(prompt), generating: type, includeSchemaInPrompt: includeSchemaInPrompt, options: options)
    }

    /// Streams content following `schema`.
    public func streamResponse(to prompt: Prompt, schema: GenerationSchema, includeSchemaInPrompt: Bool = true,
                               options: GenerationOptions = GenerationOptions()) -> ResponseStream<GeneratedContent> {
        stream(prompt, options: options, format: .init(schema: schema, isIncludedInPrompt: includeSchemaInPrompt))
    }

    /// Streams content following `schema`, for a prompt given as a string.
    public func streamResponse(to prompt: String, schema: GenerationSchema, includeSchemaInPrompt: Bool = true,
                               options: GenerationOptions = GenerationOptions()) -> ResponseStream<GeneratedContent> {
        streamResponse(to: Prompt(prompt), schema: schema, includeSchemaInPrompt: includeSchemaInPrompt, options: options)
    }

    /// Streams the response to a prompt built with ``PromptBuilder``.
    public func streamResponse(options: GenerationOptions = GenerationOptions(),
                               @PromptBuilder prompt: () throws -> Prompt) rethrows -> ResponseStream<String> {
        streamResponse(to: try prompt(), options: options)
    }

    /// Streams a value of `type` for a prompt built with ``PromptBuilder``.
    public func streamResponse<Content: Generable>(generating type: Content.Type = Content.self, includeSchemaInPrompt: Bool = true,
                                                   options: GenerationOptions = GenerationOptions(),
                                                   @PromptBuilder prompt: () throws -> Prompt) rethrows -> ResponseStream<Content> {
        streamResponse(to: try prompt(), generating: type, includeSchemaInPrompt: includeSchemaInPrompt, options: options)
    }
}
