import Foundation

/// The record of a session: instructions, prompts, tool calls and outputs, responses, in order.
///
/// Codable and Equatable: saving a transcript as JSON and loading it back gives an
/// equal value, and a session created from it renders exactly the same tokens.
public struct Transcript: Sendable, Equatable, Codable, RandomAccessCollection {
    /// The entries, oldest first.
    public var entries: [Entry]

    /// A transcript of `entries`.
    public init(entries: some Sequence<Entry> = []) { self.entries = Array(entries) }

    /// First index.
    public var startIndex: Int { entries.startIndex }
    /// One past the last index.
    public var endIndex: Int { entries.endIndex }
    /// The entry at `position`.
    public subscript(position: Int) -> Entry { entries[position] }

    /// The entries after the leading instructions (what a profile's history holds).
    public var history: [Entry] {
        if case .instructions = entries.first { return Array(entries.dropFirst()) }
        return entries
    }

    /// One item of a transcript; identified by its payload's ``EntryIdentity``.
    public enum Entry: Sendable, Equatable, Codable, Identifiable {
        /// The instructions and the tools offered to the model.
        case instructions(Instructions)
        /// A prompt from the user.
        case prompt(Prompt)
        /// Tool calls the model made.
        case toolCalls(ToolCalls)
        /// What a tool returned.
        case toolOutput(ToolOutput)
        /// A response from the model.
        case response(Response)
        /// The model's reasoning before a response (kept in the record; the models here
        /// never write one, and it is not rendered to the model).
        case reasoning(Reasoning)

        /// A short name for the kind of entry (`instructions`, `prompt`, `toolCalls`, `toolOutput`,
        /// `response`, `reasoning`).
        public var kind: String {
            switch self {
            case .instructions: "instructions"
            case .prompt: "prompt"
            case .toolCalls: "toolCalls"
            case .toolOutput: "toolOutput"
            case .response: "response"
            case .reasoning: "reasoning"
            }
        }

        /// The entry's identifier.
        public var id: String {
            switch self {
            case let .instructions(e): e.id
            case let .prompt(e): e.id
            case let .toolCalls(e): e.id
            case let .toolOutput(e): e.id
            case let .response(e): e.id
            case let .reasoning(e): e.id
            }
        }
    }

    /// Reasoning the model wrote before responding.
    public struct Reasoning: Sendable, Equatable, Codable, Identifiable, CustomStringConvertible {
        /// The entry's identifier.
        @EntryIdentity public var id: String
        /// The reasoning's content: its text (``ContextOptions/reasoningLevel``).
        public var segments: [Segment]
        /// What the app associated with the reasoning; renders nothing.
        public var metadata: [String: GeneratedContent]
        /// An opaque signature a model may attach to its reasoning; `nil` for the models here.
        public var signature: Data?
        /// A reasoning entry.
        public init(id: String = UUID().uuidString, metadata: [String: any ConvertibleToGeneratedContent] = [:],
                    segments: [Segment], signature: Data? = nil) {
            self.id = id
            self.metadata = metadata.mapValues(\.generatedContent)
            self.segments = segments
            self.signature = signature
        }

        /// The reasoning's text.
        public var description: String { segments.map(\.text).joined(separator: "\n") }
    }

    /// An instructions entry: instruction texts and tool definitions, in declaration order.
    public struct Instructions: Sendable, Equatable, Codable, Identifiable {
        /// The entry's identifier.
        @EntryIdentity public var id: String
        /// Instruction texts, in order.
        public var texts: [String]
        /// Definitions of the tools offered.
        public var toolDefinitions: [ToolDefinition]

        /// An instructions entry.
        public init(id: String = UUID().uuidString, texts: [String], toolDefinitions: [ToolDefinition] = []) {
            self.id = id
            self.texts = texts
            self.toolDefinitions = toolDefinitions
        }

        /// An instructions entry from segments (text segments become texts; a structure its JSON).
        public init(id: String = UUID().uuidString, segments: [Segment], toolDefinitions: [ToolDefinition]) {
            self.init(id: id, texts: segments.map(\.text), toolDefinitions: toolDefinitions)
        }

        /// The texts as text segments.
        public var segments: [Segment] { texts.map { .text(TextSegment(content: $0)) } }
    }

    /// A prompt entry.
    public struct Prompt: Sendable, Equatable, Codable, Identifiable {
        /// The entry's identifier.
        @EntryIdentity public var id: String
        /// The prompt text.
        public var text: String
        /// The options the request was made with (as passed: `nil` fields took the profile's
        /// or the session's choice). They do not render: changing them changes no cached token.
        public var options: GenerationOptions
        /// The structure the response had to have, for a guided-generation request.
        public var responseFormat: ResponseFormat?
        /// The request's metadata (`respond(to:options:contextOptions:metadata:)`); renders nothing.
        public var metadata: [String: GeneratedContent]
        /// A prompt entry with `text`.
        public init(id: String = UUID().uuidString, text: String, options: GenerationOptions = GenerationOptions(),
                    responseFormat: ResponseFormat? = nil, metadata: [String: any ConvertibleToGeneratedContent] = [:]) {
            self.id = id
            self.text = text
            self.options = options
            self.responseFormat = responseFormat
            self.metadata = metadata.mapValues(\.generatedContent)
        }

        /// A prompt entry from segments (joined by newlines; a structure as its JSON).
        public init(id: String = UUID().uuidString, segments: [Segment], options: GenerationOptions = GenerationOptions(),
                    responseFormat: ResponseFormat? = nil, metadata: [String: any ConvertibleToGeneratedContent] = [:]) {
            self.init(id: id, text: segments.map(\.text).joined(separator: "\n"), options: options, responseFormat: responseFormat,
                      metadata: metadata)
        }

        /// The text as one text segment.
        public var segments: [Segment] { [.text(TextSegment(content: text))] }
    }

    /// The schema a guided-generation request asked for.
    public struct ResponseFormat: Sendable, Equatable, Codable {
        /// The schema's name (the generable type's, or the dynamic schema's).
        public var name: String
        /// The schema.
        public var schema: GenerationSchema
        /// Whether the schema's text was part of the prompt the model read
        /// (`includeSchemaInPrompt`); it is rendered again wherever the prompt is.
        public var isIncludedInPrompt: Bool

        /// The format of a schema.
        public init(schema: GenerationSchema, isIncludedInPrompt: Bool = true) {
            name = schema.name
            self.schema = schema
            self.isIncludedInPrompt = isIncludedInPrompt
        }

        /// The format of a generable type.
        public init<Content: Generable>(type: Content.Type, isIncludedInPrompt: Bool = true) {
            self.init(schema: Content.generationSchema, isIncludedInPrompt: isIncludedInPrompt)
            name = String(describing: type)
        }
    }

    /// A part of an entry's content.
    public enum Segment: Sendable, Equatable, Codable, Identifiable {
        /// Text.
        case text(TextSegment)
        /// A structured value.
        case structure(StructuredSegment)

        /// The segment's identifier.
        public var id: String {
            switch self {
            case let .text(t): t.id
            case let .structure(s): s.id
            }
        }
    }

    /// Text content.
    public struct TextSegment: Sendable, Equatable, Codable, Identifiable {
        /// The segment's identifier (saved with it; not part of equality, like an entry's).
        @EntryIdentity public var id: String
        /// The text.
        public var content: String
        /// A text segment.
        public init(id: String = UUID().uuidString, content: String) {
            self.id = id
            self.content = content
        }
    }

    /// A structured value and the schema it was generated under.
    public struct StructuredSegment: Sendable, Equatable, Codable, Identifiable {
        /// The segment's identifier (saved with it; not part of equality, like an entry's).
        @EntryIdentity public var id: String
        /// The schema's name.
        public var source: String
        /// The value.
        public var content: GeneratedContent
        /// A structured segment.
        public init(id: String = UUID().uuidString, source: String, content: GeneratedContent) {
            self.id = id
            self.source = source
            self.content = content
        }
    }

    /// A tool the model may call, as the model sees it.
    ///
    /// What the model reads is ``argumentsSchema``, the schema's text: a definition made from
    /// ``parameters`` (or from a tool that shows its schema) writes it, and setting
    /// ``parameters`` rewrites it unless the definition leaves the schema out (empty text).
    public struct ToolDefinition: Sendable, Equatable, Codable {
        /// The tool's name.
        public var name: String
        /// What the tool does.
        public var description: String
        /// The arguments' schema. A definition made from text only (``init(name:description:argumentsSchema:)``),
        /// or read from a transcript saved before definitions kept their schema, has an object
        /// schema with no properties here; its ``argumentsSchema`` is still the text the model read.
        public var parameters: GenerationSchema {
            didSet { if !argumentsSchema.isEmpty { argumentsSchema = parameters.debugDescription } }
        }
        /// The parameters schema as the model reads it (empty when the tool leaves it out).
        public var argumentsSchema: String

        /// A definition of a tool with `parameters`, shown to the model.
        public init(name: String, description: String, parameters: GenerationSchema) {
            self.init(name: name, description: description, parameters: parameters, showsSchema: true)
        }

        /// The definition `tool` offers: its name, description and parameters (the schema's
        /// text left out when the tool's ``Tool/includesSchemaInInstructions`` is false).
        public init(tool: some Tool) {
            self.init(name: tool.name, description: tool.description, parameters: tool.parameters,
                      showsSchema: tool.includesSchemaInInstructions)
        }

        /// A definition from the text the model reads (no schema to go with it).
        public init(name: String, description: String, argumentsSchema: String) {
            self.name = name
            self.description = description
            self.parameters = Self.noSchema
            self.argumentsSchema = argumentsSchema
        }

        init(name: String, description: String, parameters: GenerationSchema, showsSchema: Bool) {
            self.name = name
            self.description = description
            self.parameters = parameters
            self.argumentsSchema = showsSchema ? parameters.debugDescription : ""
        }

        static let noSchema = GenerationSchema(root: .object(name: "", description: nil, properties: []))
    }

    /// The calls the model made in one step.
    public struct ToolCalls: Sendable, Equatable, Codable, Identifiable, RandomAccessCollection {
        /// The entry's identifier.
        @EntryIdentity public var id: String
        /// The calls, in order.
        public var calls: [ToolCall]
        /// The exact tokens the model generated for the calls (markers included), when known,
        /// so the next request renders what is already in the KV cache.
        public var tokenIDs: [Int]?
        /// What wrote ``tokenIDs``: `tokenizer:` and the model's ``LMRuntime/Tokenizer/identity``,
        /// as on a ``Response``. Ids another tokenizer wrote are not rendered; the calls' text is.
        /// Empty when unknown (the ids are then taken as the session model's).
        public var assetIDs: [String]
        /// A tool-calls entry.
        public init(id: String = UUID().uuidString, calls: [ToolCall], tokenIDs: [Int]? = nil, assetIDs: [String] = []) {
            self.id = id
            self.calls = calls
            self.tokenIDs = tokenIDs
            self.assetIDs = assetIDs
        }

        /// A tool-calls entry of `calls`, in the order the model made them (FoundationModels' form).
        public init(id: String = UUID().uuidString, _ calls: some Sequence<ToolCall>) {
            self.init(id: id, calls: Array(calls))
        }

        /// First index.
        public var startIndex: Int { calls.startIndex }
        /// One past the last index.
        public var endIndex: Int { calls.endIndex }
        /// The call at `position`.
        public subscript(position: Int) -> ToolCall { calls[position] }
    }

    /// One call: a tool name and its arguments, as the model wrote them.
    public struct ToolCall: Sendable, Equatable, Codable, Identifiable {
        /// The call's identifier (saved with it; not part of equality, like an entry's).
        @EntryIdentity public var id: String
        /// The tool's name.
        public var toolName: String
        /// The arguments: an instance of the tool's parameters schema.
        public var arguments: GeneratedContent
        /// What the app associated with the call; renders nothing.
        public var metadata: [String: GeneratedContent]
        /// A tool call.
        public init(id: String = UUID().uuidString, toolName: String, arguments: GeneratedContent) {
            self.init(id: id, metadata: [:], toolName: toolName, arguments: arguments)
        }

        /// A tool call with metadata.
        public init(id: String = UUID().uuidString, metadata: [String: any ConvertibleToGeneratedContent],
                    toolName: String, arguments: GeneratedContent) {
            self.id = id
            self.metadata = metadata.mapValues(\.generatedContent)
            self.toolName = toolName
            self.arguments = arguments
        }
    }

    /// What a tool returned.
    public struct ToolOutput: Sendable, Equatable, Codable, Identifiable {
        /// The entry's identifier.
        @EntryIdentity public var id: String
        /// The tool's name.
        public var toolName: String
        /// The output text.
        public var text: String
        /// A tool-output entry.
        public init(id: String = UUID().uuidString, toolName: String, text: String) {
            self.id = id
            self.toolName = toolName
            self.text = text
        }

        /// A tool-output entry from segments (joined by newlines; a structure as its JSON).
        public init(id: String = UUID().uuidString, toolName: String, segments: [Segment]) {
            self.init(id: id, toolName: toolName, text: segments.map(\.text).joined(separator: "\n"))
        }

        /// The output as one text segment.
        public var segments: [Segment] { [.text(TextSegment(content: text))] }
    }

    /// A response entry: the text, and the exact token ids the model generated, so the
    /// next request renders the tokens already in the KV cache (never a re-tokenization).
    ///
    /// A response without token ids (built by hand, or saved by code that does not know
    /// them) renders its text, tokenized; a saved transcript without the `tokenIDs` key
    /// decodes to such a response. So does a response whose ids belong to another tokenizer
    /// (its ``assetIDs`` name a `tokenizer:` other than the session model's): a transcript
    /// saved before the app's model changed rehydrates with its text, not with ids that
    /// would read as something else.
    public struct Response: Sendable, Equatable, Codable, Identifiable {
        /// The entry's identifier.
        @EntryIdentity public var id: String
        /// The decoded text.
        public var text: String
        /// The generated token ids (stop token excluded); empty when unknown.
        public var tokenIDs: [Int]
        /// The value, for a guided-generation response (`text` is then its JSON).
        public var structure: StructuredSegment?
        /// What generated the response: `tokenizer:` and the generating model's
        /// ``LMRuntime/Tokenizer/identity``, saying what ``tokenIDs`` mean. Empty when unknown
        /// (the ids are then taken as the session model's).
        public var assetIDs: [String]
        /// What the app associated with the response; renders nothing.
        public var metadata: [String: GeneratedContent]
        /// A response entry.
        public init(id: String = UUID().uuidString, text: String, tokenIDs: [Int], structure: StructuredSegment? = nil,
                    assetIDs: [String] = [], metadata: [String: any ConvertibleToGeneratedContent] = [:]) {
            self.id = id
            self.text = text
            self.tokenIDs = tokenIDs
            self.structure = structure
            self.assetIDs = assetIDs
            self.metadata = metadata.mapValues(\.generatedContent)
        }

        /// A response from segments, as FoundationModels builds one: its text is the segments'
        /// (joined by newlines; a structure as its JSON), with no token ids; a single structured
        /// segment is its value.
        public init(id: String = UUID().uuidString, assetIDs: [String], segments: [Segment]) {
            self.init(id: id, assetIDs: assetIDs, metadata: [:], segments: segments)
        }

        /// A response from segments with metadata (FoundationModels' iOS 27 form).
        public init(id: String = UUID().uuidString, metadata: [String: any ConvertibleToGeneratedContent] = [:], segments: [Segment]) {
            self.init(id: id, assetIDs: [], metadata: metadata, segments: segments)
        }

        init(id: String, assetIDs: [String], metadata: [String: any ConvertibleToGeneratedContent], segments: [Segment]) {
            var structure: StructuredSegment?
            if segments.count == 1, case let .structure(s) = segments[0] { structure = s }
            self.init(id: id, text: segments.map(\.text).joined(separator: "\n"), tokenIDs: [], structure: structure,
                      assetIDs: assetIDs, metadata: metadata)
        }

        /// The content: one structured segment for a guided response, one text segment otherwise.
        public var segments: [Segment] {
            structure.map { [.structure($0)] } ?? [.text(TextSegment(content: text))]
        }
    }
}

extension Transcript.Prompt {
    private enum CodingKeys: String, CodingKey { case id, text, options, responseFormat, metadata }

    /// Reads a prompt; `options`, `responseFormat` and `metadata` may be absent (transcripts
    /// saved before prompts kept their options read with the defaults).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _id = try c.decode(EntryIdentity.self, forKey: .id)
        text = try c.decode(String.self, forKey: .text)
        options = try c.decodeIfPresent(GenerationOptions.self, forKey: .options) ?? GenerationOptions()
        responseFormat = try c.decodeIfPresent(Transcript.ResponseFormat.self, forKey: .responseFormat)
        metadata = try c.decodeIfPresent([String: GeneratedContent].self, forKey: .metadata) ?? [:]
    }
}

extension Transcript.Response {
    private enum CodingKeys: String, CodingKey { case id, text, tokenIDs, structure, assetIDs, metadata }

    /// Reads a response; `id`, `tokenIDs`, `structure`, `assetIDs` and `metadata` may be absent.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _id = try c.decode(EntryIdentity.self, forKey: .id)
        text = try c.decode(String.self, forKey: .text)
        tokenIDs = try c.decodeIfPresent([Int].self, forKey: .tokenIDs) ?? []
        structure = try c.decodeIfPresent(Transcript.StructuredSegment.self, forKey: .structure)
        assetIDs = try c.decodeIfPresent([String].self, forKey: .assetIDs) ?? []
        metadata = try c.decodeIfPresent([String: GeneratedContent].self, forKey: .metadata) ?? [:]
    }
}

extension Transcript.Reasoning {
    private enum CodingKeys: String, CodingKey { case id, segments, metadata, signature }

    /// Reads a reasoning entry; `metadata` and `signature` may be absent (entries saved before
    /// they existed read with none).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _id = try c.decode(EntryIdentity.self, forKey: .id)
        segments = try c.decode([Transcript.Segment].self, forKey: .segments)
        metadata = try c.decodeIfPresent([String: GeneratedContent].self, forKey: .metadata) ?? [:]
        signature = try c.decodeIfPresent(Data.self, forKey: .signature)
    }
}

extension Transcript.ToolCall {
    private enum CodingKeys: String, CodingKey { case id, toolName, arguments, metadata }

    /// Reads a call; `id` and `metadata` may be absent.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _id = try c.decode(EntryIdentity.self, forKey: .id)
        toolName = try c.decode(String.self, forKey: .toolName)
        arguments = try c.decode(GeneratedContent.self, forKey: .arguments)
        metadata = try c.decodeIfPresent([String: GeneratedContent].self, forKey: .metadata) ?? [:]
    }
}

extension Transcript.ToolDefinition {
    private enum CodingKeys: String, CodingKey { case name, description, parameters, argumentsSchema }

    /// Reads a definition; `parameters` may be absent (definitions saved before they kept
    /// their schema read with an empty one and keep their text).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        description = try c.decode(String.self, forKey: .description)
        parameters = try c.decodeIfPresent(GenerationSchema.self, forKey: .parameters) ?? Self.noSchema
        argumentsSchema = try c.decode(String.self, forKey: .argumentsSchema)
    }
}

extension Transcript.ToolCalls {
    private enum CodingKeys: String, CodingKey { case id, calls, tokenIDs, assetIDs }

    /// Reads a tool-calls entry; `id`, `tokenIDs` and `assetIDs` may be absent.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _id = try c.decode(EntryIdentity.self, forKey: .id)
        calls = try c.decode([Transcript.ToolCall].self, forKey: .calls)
        tokenIDs = try c.decodeIfPresent([Int].self, forKey: .tokenIDs)
        assetIDs = try c.decodeIfPresent([String].self, forKey: .assetIDs) ?? []
    }
}

extension Transcript.Segment {
    /// The segment as text (a structure as its JSON).
    var text: String {
        switch self {
        case let .text(t): t.content
        case let .structure(s): s.content.jsonString
        }
    }
}
