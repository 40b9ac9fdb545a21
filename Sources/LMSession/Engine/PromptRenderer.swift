import Foundation
import LMRuntime

/// A request as tokens, with the segment each token belongs to.
struct RenderedPrompt: Sendable, Equatable {
    /// The tokens, in order.
    var tokens: [Int] = []
    /// Consecutive spans covering `tokens`, each with its segment.
    var spans: [(range: Range<Int>, segment: InvalidationReport.Segment)] = []
    /// Where the instructions run into the segment after them (the `[INST]` formats): what that
    /// segment opens with instead of its marker when it is a user turn, and what it writes before
    /// its marker otherwise. `nil` once a segment has taken it, and in every other format.
    var carry: (user: [Int], other: [Int])?
    /// Set after the request's own reasoning: the assistant turn it opened goes on, so the next
    /// assistant segment (a call, or the response header) writes no header of its own.
    var continuesAssistantTurn = false

    static func == (a: RenderedPrompt, b: RenderedPrompt) -> Bool {
        a.tokens == b.tokens && a.spans.map(\.range) == b.spans.map(\.range)
    }

    /// The segment containing `position` (the last one when `position` is at the end).
    func segment(at position: Int) -> InvalidationReport.Segment {
        spans.first { $0.range.contains(position) }?.segment ?? spans.last?.segment ?? .prompt
    }

    /// Where each segment ends: the positions a stored prefix may end at.
    var boundaries: [Int] { spans.map(\.range.upperBound) }

    /// Where the prefix store keeps entries: the end of the instructions and tool definitions
    /// (shared by every session with the same ones) and the end of each response (a turn).
    var publishBoundaries: [Int] {
        spans.filter {
            switch $0.segment {
            case .instructions, .toolDefinition: $0.range.upperBound == preambleEnd
            case let .transcriptEntry(_, kind): kind == "response"
            case .prompt, .responseHeader, .responseSchema: false
            }
        }.map(\.range.upperBound)
    }

    /// The end of the instructions and tool definitions.
    var preambleEnd: Int {
        spans.last {
            switch $0.segment {
            case .instructions, .toolDefinition: true
            default: false
            }
        }?.range.upperBound ?? 0
    }

    mutating func append(_ tokens: [Int], as segment: InvalidationReport.Segment) {
        let start = self.tokens.count
        self.tokens += tokens
        spans.append((start ..< self.tokens.count, segment))
    }
}

/// Turns instructions, history and a prompt into tokens, segment by segment.
///
/// Each segment is tokenized on its own and the results concatenated, so appending
/// never re-tokenizes earlier text; a response renders the token ids it was generated
/// as. Layout: `BOS <|system|> texts and tool definitions <|end|>`, then per entry
/// `<|user|> text <|end|>`, `<|assistant|> tokens <|end|>`, `<|assistant|> <|tool_call|> ... <|end|>`,
/// `<|tool|> text <|end|>`, then the new prompt and the `<|assistant|>` header.
///
/// The markers are the vocabulary's own where it has them: the bundled control pieces; else
/// ChatML's (`<|im_start|>role\n` ... `<|im_end|>\n`: Qwen2, SmolLM) or Llama 3's
/// (`<|start_header_id|>role<|end_header_id|>\n\n` ... `<|eot_id|>`) when those are control
/// tokens of the vocabulary; else plain text (`System:`, `User:`, ... and EOS).
///
/// A ChatML vocabulary with `<tool_call>` and `</tool_call>` tokens (Qwen2.5) calls tools
/// in their tags (``CallFormat/tagged``): the tools listed in the system turn as JSON lines, a call
/// `<tool_call>{"name":…,"arguments":…}</tool_call>`, its output a user turn between
/// `<tool_response>` and `</tool_response>`. A Llama 3 vocabulary with `<|python_tag|>` and
/// `<|eom_id|>` control tokens (Llama 3.1 and later) calls custom tools as its template writes
/// them, a response that is `{"name":…,"parameters":…}<|eot_id|>` (``CallFormat/leadingJSON``),
/// its output an `ipython` turn.
///
/// A vocabulary with none of those, in llama2.c's layout, takes its turns from its GGUF chat template:
/// `[INST]` templates (Llama 2 chat, Mistral Instruct v0.1–v0.2; and Mistral v3 vocabularies, whose
/// `[INST]` and `[/INST]` are control tokens, whatever the template) render `[INST] prompt [/INST] answer</s>`,
/// the system message inside the first `[INST]` (Llama 2's between `<<SYS>>` and `<</SYS>>`; BOS before
/// every turn where the template writes it so); Zephyr templates (TinyLlama chat) `<|user|>\n prompt</s>\n`.
/// Their markers are text, encoded as the template spells them; each segment keeps its own dummy-prefix
/// space (llama.cpp writes one after every special token too). Only a Mistral v3 vocabulary, whose
/// `[TOOL_CALLS]`, `[AVAILABLE_TOOLS]` and `[TOOL_RESULTS]` are control tokens, calls tools
/// (``CallFormat/toolCallsList``): the tools listed before the first `[INST]`.
struct PromptRenderer: Sendable {
    /// How a tool call is written between its opening token and ``callEnd``.
    enum CallFormat: Sendable {
        /// ` name arguments`, closed by `<|end|>` (the bundled control pieces).
        case plain
        /// `{"name":"…","arguments":…}`, closed by `</tool_call>` and then the turn's close.
        case tagged
        /// `{"name":"…","parameters":…}` as the whole response, closed by the end of turn (Llama 3.1's
        /// and 3.2's custom tools). No token opens it: a response whose first token starts a JSON
        /// object is a call (as llama.cpp reads these models' calls).
        case leadingJSON
        /// `[{"name":"…","arguments":…}]` after Mistral v3's `[TOOL_CALLS]`, closed by EOS; the tools
        /// listed in `[AVAILABLE_TOOLS]`, an output between `[TOOL_RESULTS]` and `[/TOOL_RESULTS]`.
        case toolCallsList

        /// The key of the arguments in a JSON call; `nil` for plain calls.
        var argumentsKey: String? {
            switch self {
            case .plain: nil
            case .tagged, .toolCallsList: "arguments"
            case .leadingJSON: "parameters"
            }
        }

        /// What a JSON call writes after a tool's arguments: the object's `}`, and the list's `]`
        /// for ``toolCallsList``; `nil` for plain calls.
        var jsonClosing: String? {
            switch self {
            case .plain: nil
            case .tagged, .leadingJSON: "}"
            case .toolCallsList: "}]"
            }
        }

        /// What a JSON call writes before a tool's arguments, `{"name":"…","arguments":`, as the
        /// call grammar and ``PromptRenderer/callBody(name:arguments:)`` both spell it; `nil` for plain calls.
        func jsonOpening(name: String) -> String? {
            guard let key = argumentsKey else { return nil }
            var opening = (self == .toolCallsList ? "[" : "") + #"{"name":"#
            GeneratedContent.quote(name, into: &opening)
            return opening + #",""# + key + #"":"#
        }
    }

    let tokenizer: Tokenizer
    /// Markers that open segments: one control token each with the bundled tokenizer, a chat
    /// template's role header, or plain-text markers (`System:`, `User:`, ...).
    let system, user, assistant, tool: [Int]
    /// Opens a tool call; `nil` for ``CallFormat/leadingJSON`` calls, which no token opens, and
    /// when the tokenizer has no control piece for it (no tool calls).
    let toolCall: Int?
    /// Closes a tool call: `end`, or `</tool_call>` for ``CallFormat/tagged`` calls.
    let callEnd: Int
    /// How the calls between ``toolCall`` and ``callEnd`` are written.
    let callFormat: CallFormat
    /// Where tool definitions go outside the system turn (Mistral v3's `[AVAILABLE_TOOLS]` and
    /// `[/AVAILABLE_TOOLS]`, before it); `nil` where they are lines of the system turn.
    let toolList: (open: [Int], close: [Int])?
    /// What closes a tool's output: ``userClose``, or Mistral v3's `[/TOOL_RESULTS]`.
    let toolClose: [Int]
    /// Ends a segment, and generation: `<|end|>`, the chat template's end of turn, or EOS.
    let end: Int
    /// What closes a rendered segment: `end`, then whatever the template puts between turns
    /// (ChatML's newline).
    let close: [Int]
    /// What closes a user turn (a prompt, a tool's output, a schema): ``close``, or `[/INST]` in
    /// the `[INST]` formats, whose assistant turn has no header.
    let userClose: [Int]
    /// What closes the instructions: ``close``, or in the `[INST]` formats what follows the system
    /// message inside the first user turn (Llama 2's `\n<</SYS>>\n\n`), which stays open.
    let systemClose: [Int]
    /// What the instructions leave for the next segment, ``RenderedPrompt/carry``: with a system
    /// message, the `[INST]` formats' open user turn; without one, their first turn's opening
    /// without the BOS the instructions wrote. `nil` in every other format.
    let systemCarry: (withMessage: (user: [Int], other: [Int]), withoutMessage: (user: [Int], other: [Int])?)?
    /// What ends a response outside a tool call (not kept in it): ``end``, the vocabulary's EOS
    /// and BOS, and Llama 3's `<|eom_id|>`, an end of message wherever it comes (as llama.cpp
    /// stops on it). The turn is then closed with ``close``, as the next request renders it.
    let stopTokens: Set<Int>
    /// The system message the chat template writes when a conversation has none (Qwen2's and
    /// SmolLM2's ChatML templates name the assistant there): the instructions' text when they hold
    /// none; `nil` when the template has no such message (``defaultSystemMessage(inChatMLTemplate:)``).
    let defaultInstructions: String?
    /// The tokenizer's asset identifier (`tokenizer:` and its identity), recorded on every
    /// generated response.
    let assetID: String
    /// Ids of texts rendered before, shared by the model's sessions; `nil` encodes every time.
    let texts: TextTokenCache?
    /// What opens reasoning at the start of a response, and what closes it before the response
    /// (``Reasoning``): the vocabulary's `<think>` and `</think>` tokens where it has both (Qwen3,
    /// DeepSeek-R1 distills), the same words as text otherwise.
    let reasoningOpen: [Int], reasoningClose: [Int]
    /// The token that ends reasoning when the model writes it: `</think>` where it is one token;
    /// `nil` where it is text (reasoning then runs to its budget unless the model ends its turn).
    let reasoningEnd: Int?

    /// A request's own reasoning as it renders: its tokens, and whether it is closed (the
    /// response follows) or still open (the model is writing it).
    struct Reasoning: Sendable {
        var tokens: [Int]
        var isClosed: Bool
    }

    init(tokenizer: Tokenizer, texts: TextTokenCache? = nil) {
        self.texts = texts
        self.tokenizer = tokenizer
        assetID = Self.tokenizerAssetPrefix + tokenizer.identity
        let encode = { tokenizer.encode($0, bos: false) }
        /// A control token of the vocabulary (never ordinary text that happens to look like one).
        func control(_ piece: String) -> Int? { tokenizer.id(of: piece).flatMap { tokenizer.controlTokens.contains($0) ? $0 : nil } }
        var calls: (open: Int?, close: Int?, format: CallFormat) = (tokenizer.id(of: ControlPieces.toolCall), nil, .plain)
        let template = tokenizer.chatTemplate ?? ""
        var stops: [Int] = []   // what ends a response besides `end`, EOS and BOS
        var mistralTools: (call: Int, list: [Int], listEnd: [Int], results: [Int], resultsEnd: [Int])?
        /// `[INST]` and `[/INST]`: control tokens (Mistral v3), or text where the template writes them.
        func instructionMarkers() -> (open: [Int], close: [Int])? {
            if let open = control("[INST]"), let close = control("[/INST]") { return ([open], [close]) }
            return template.contains("[INST]") && template.contains("[/INST]") ? (encode("[INST]"), encode("[/INST]")) : nil
        }
        if tokenizer.id(of: ControlPieces.system) == nil, let open = control("<|im_start|>"), let shut = control("<|im_end|>") {
            func role(_ name: String) -> [Int] { [open] + encode(name + "\n") }
            (system, user, assistant, tool) = (role("system"), role("user"), role("assistant"), role("tool"))
            (end, close) = (shut, [shut] + encode("\n"))
            (userClose, systemClose, systemCarry) = (close, close, nil)
            defaultInstructions = tokenizer.chatTemplate.flatMap(Self.defaultSystemMessage(inChatMLTemplate:))
            if let opens = tokenizer.id(of: "<tool_call>"), let closes = tokenizer.id(of: "</tool_call>") {
                calls = (opens, closes, .tagged)
            }
        } else if tokenizer.id(of: ControlPieces.system) == nil, let start = control("<|start_header_id|>"),
                  let stop = control("<|end_header_id|>"), let eot = control("<|eot_id|>") {
            func role(_ name: String) -> [Int] { [start] + encode(name) + [stop] + encode("\n\n") }
            (system, user, assistant, tool) = (role("system"), role("user"), role("assistant"), role("ipython"))
            (end, close) = (eot, [eot])
            (userClose, systemClose, systemCarry) = (close, close, nil)
            defaultInstructions = nil
            if control("<|python_tag|>") != nil, let endOfMessage = control("<|eom_id|>") {   // Llama 3.1 and later
                calls = (nil, nil, .leadingJSON)
                stops = [endOfMessage]
            }
        } else if tokenizer.id(of: ControlPieces.system) == nil, !tokenizer.isByteLevel, let markers = instructionMarkers() {
            // `[INST] prompt [/INST] answer</s>`, the markers control tokens where the vocabulary has
            // them (Mistral v3) and text otherwise; the system message opens the first [INST].
            let bosEachTurn = ["bos_token + '[INST]", #"bos_token + "[INST]"#].contains { template.contains($0) }
            let opening = markers.open
            user = (bosEachTurn ? [tokenizer.bosToken] : []) + opening
            if let calls = control("[TOOL_CALLS]"), let list = control("[AVAILABLE_TOOLS]"), let listEnd = control("[/AVAILABLE_TOOLS]"),
               let results = control("[TOOL_RESULTS]"), let resultsEnd = control("[/TOOL_RESULTS]") {   // Mistral v3's tool tokens
                mistralTools = (calls, [list], [listEnd], [results], [resultsEnd])
            }
            tool = mistralTools?.results ?? user
            assistant = []
            system = template.contains("<<SYS>>") ? opening + encode("<<SYS>>\n") : opening
            (end, close, userClose) = (tokenizer.eosToken, [tokenizer.eosToken], markers.close)
            systemClose = tokenizer.encode(continuing: template.contains("<<SYS>>") ? "\n<</SYS>>\n\n" : "\n\n")
            systemCarry = (([], userClose), bosEachTurn ? (opening, []) : nil)
            defaultInstructions = nil
        } else if tokenizer.id(of: ControlPieces.system) == nil, template.contains("<|user|>"), template.contains("<|assistant|>"), template.contains("eos_token") {
            // Zephyr: `<|user|>\n text</s>\n`, the markers as text.
            func role(_ name: String) -> [Int] { tokenizer.encode(continuing: "<|\(name)|>\n") }
            (system, user, assistant) = (encode("<|system|>\n"), role("user"), role("assistant"))
            tool = user
            (end, close) = (tokenizer.eosToken, [tokenizer.eosToken] + encode("\n"))
            (userClose, systemClose, systemCarry) = (close, close, nil)
            defaultInstructions = nil
        } else {
            func marker(_ piece: String, fallback: String) -> [Int] { tokenizer.id(of: piece).map { [$0] } ?? encode(fallback) }
            system = marker(ControlPieces.system, fallback: "System:")
            user = marker(ControlPieces.user, fallback: "User:")
            assistant = marker(ControlPieces.assistant, fallback: "Assistant:")
            tool = marker(ControlPieces.tool, fallback: "Tool:")
            end = tokenizer.id(of: ControlPieces.end) ?? tokenizer.eosToken
            close = [end]
            (userClose, systemClose, systemCarry) = (close, close, nil)
            defaultInstructions = nil
        }
        if let mistralTools {
            calls = (mistralTools.call, end, .toolCallsList)
            (toolList, toolClose) = ((mistralTools.list, mistralTools.listEnd), mistralTools.resultsEnd)
        } else {
            (toolList, toolClose) = (nil, userClose)
        }
        (toolCall, callEnd, callFormat) = (calls.open, calls.close ?? end, calls.format)
        stopTokens = Set([end, tokenizer.eosToken, tokenizer.bosToken] + stops)
        /// Markers written after generated tokens: with no SentencePiece dummy space before them.
        func continuing(_ s: String) -> [Int] { tokenizer.isByteLevel ? encode(s) : tokenizer.encode(continuing: s) }
        if let think = tokenizer.id(of: "<think>"), let thought = tokenizer.id(of: "</think>") {
            (reasoningOpen, reasoningClose, reasoningEnd) = ([think] + continuing("\n"), [thought] + continuing("\n\n"), thought)
        } else {
            (reasoningOpen, reasoningClose, reasoningEnd) = (continuing("<think>\n"), continuing("\n</think>\n\n"), nil)
        }
    }

    func text(_ s: String) -> [Int] { texts?.tokens(s) ?? tokenizer.encode(s, bos: false) }

    /// How a response's ``Transcript/Response/assetIDs`` name the tokenizer its ids are in.
    static let tokenizerAssetPrefix = "tokenizer:"

    /// The instructions segment(s); with no text among them, the template's ``defaultInstructions`` first.
    func renderInstructions(_ components: [InstructionComponent], into out: inout RenderedPrompt) {
        var components = components
        if let defaultInstructions, !components.contains(where: { if case .text = $0 { true } else { false } }) {
            components.insert(.text(defaultInstructions), at: 0)
        }
        var start = tokenizer.sequenceStart
        if let toolList {   // Mistral v3: `[AVAILABLE_TOOLS] [{…}, {…}][/AVAILABLE_TOOLS]` before the system turn
            let tools = components.compactMap { if case let .tool(t) = $0 { t } else { nil } }
            for (i, t) in tools.enumerated() {
                let opening = i == 0 ? start + toolList.open : []
                let closing = i == tools.count - 1 ? tokenizer.encode(continuing: "]") + toolList.close : []
                let item = describe(t.definition, first: i == 0)
                out.append(opening + (i == 0 ? text(item) : tokenizer.encode(continuing: item)) + closing, as: .toolDefinition(name: t.name))
            }
            if !tools.isEmpty { start = [] }
            components.removeAll { if case .tool = $0 { true } else { false } }
        }
        var prefix = start + system
        var textIndex = 0, toolIndex = 0
        if components.isEmpty, let carry = systemCarry {   // no system message: the sequence's start only
            if !start.isEmpty { out.append(start, as: .instructions(index: 0)) }
            out.carry = carry.withoutMessage
            return
        }
        if components.isEmpty { out.append(prefix + close, as: .instructions(index: 0)) }
        out.carry = systemCarry?.withMessage
        for (i, component) in components.enumerated() {
            let suffix = i == components.count - 1 ? systemClose : []
            switch component {
            case let .text(t):
                out.append(prefix + text(t) + suffix, as: .instructions(index: textIndex))
                textIndex += 1
            case let .tool(t):
                out.append(prefix + text(describe(t.definition, first: toolIndex == 0)) + suffix, as: .toolDefinition(name: t.name))
                toolIndex += 1
            }
            prefix = []
        }
    }

    /// One history entry.
    func renderEntry(_ entry: Transcript.Entry, index: Int, into out: inout RenderedPrompt) {
        let segment = InvalidationReport.Segment.transcriptEntry(index: index, kind: entry.kind)
        switch entry {
        case let .instructions(i):
            out.append(opening([], userTurn: false, &out) + text(i.texts.joined(separator: "\n")), as: segment)
        case let .prompt(p):
            out.append(opening(user, userTurn: true, &out) + text(p.text) + userClose + schemaTokens(p.responseFormat), as: segment)
        case let .response(r):
            // The tokens it was generated as; a response known only by its text, or whose ids
            // another tokenizer wrote or are not all in this vocabulary, renders the text.
            out.append(opening(assistant, userTurn: false, &out) + (usable(r.tokenIDs, assetIDs: r.assetIDs) ?? text(r.text)) + close, as: segment)
        case let .toolCalls(calls):
            // A plain call's `<|end|>` and a Llama 3 call's `<|eot_id|>` end the message too; a
            // tagged call is followed by the turn's close.
            out.append(opening(assistant, userTurn: false, &out) + calls.tokenIDs(self) + (callFormat == .tagged ? close : []), as: segment)
        case let .toolOutput(o):
            switch callFormat {
            case .plain, .leadingJSON: out.append(opening(tool, userTurn: tool == user, &out) + text(o.text) + toolClose, as: segment)
            case .tagged: out.append(opening(user, userTurn: true, &out) + text("<tool_response>\n" + o.text + "\n</tool_response>") + userClose, as: segment)
            case .toolCallsList:
                var content = #"{"content": "#
                GeneratedContent.quote(o.text, into: &content)
                out.append(opening(tool, userTurn: false, &out) + text(content + "}") + toolClose, as: segment)
            }
        case .reasoning:
            out.append([], as: segment)   // kept in the record, not shown to the model
        }
    }

    /// Whether a call is a JSON object opening the response, with no token before it (``CallFormat/leadingJSON``).
    var callOpensWithJSON: Bool { callFormat == .leadingJSON }

    /// Tokens a call takes besides what its grammar writes: its opening tag, if it has one, and ``callEnd``.
    var callMarkerCount: Int { callOpensWithJSON ? 1 : 2 }

    /// Whether `token` starts a JSON object: `{` after nothing but white space.
    func opensJSONObject(_ token: Int) -> Bool {
        tokenizer.bytes(of: token, after: nil).first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } == UInt8(ascii: "{")
    }

    /// The whole request: instructions, history, the new prompt (with its schema segment when
    /// it asks for one), then any entries the request added after it (a tool round's call and
    /// output), and the response header.
    ///
    /// The `.reasoning` entries among `added` are the request's own (one before each round), the
    /// n-th rendered as `reasoning[n]` says inside the assistant turn it opens (the response, or a
    /// call, continues that turn); reasoning in the history renders nothing, as reasoning models'
    /// templates drop it from earlier turns.
    func render(_ components: [InstructionComponent], history: [Transcript.Entry], prompt: Transcript.Prompt?,
                after added: [Transcript.Entry] = [], reasoning: [Reasoning] = [], header: Bool = true) -> RenderedPrompt {
        var out = RenderedPrompt()
        renderInstructions(components, into: &out)
        for (i, entry) in history.enumerated() { renderEntry(entry, index: i, into: &out) }
        if let prompt {
            out.append(opening(user, userTurn: true, &out) + text(prompt.text) + userClose, as: .prompt)
            if let format = prompt.responseFormat, format.isIncludedInPrompt {
                out.append(schemaTokens(format), as: .responseSchema(name: format.name))
            }
        }
        var thoughts = reasoning[...]
        for (i, entry) in added.enumerated() {
            if case .reasoning = entry, let reasoning = thoughts.popFirst() {
                let thought = opening(assistant, userTurn: false, &out) + reasoningOpen + reasoning.tokens + (reasoning.isClosed ? reasoningClose : [])
                out.append(thought, as: .transcriptEntry(index: history.count + 1 + i, kind: entry.kind))
                out.continuesAssistantTurn = true
            } else {
                renderEntry(entry, index: history.count + 1 + i, into: &out)
            }
        }
        if header { out.append(opening(assistant, userTurn: false, &out), as: .responseHeader) }
        return out
    }

    /// `marker`, or what replaces it where the instructions ran into this segment
    /// (``RenderedPrompt/carry``, which this takes): the open turn's continuation for a user turn,
    /// its close and then `marker` for any other. Nothing for the assistant's marker right after
    /// the request's reasoning (``RenderedPrompt/continuesAssistantTurn``): that turn goes on.
    private func opening(_ marker: [Int], userTurn: Bool, _ out: inout RenderedPrompt) -> [Int] {
        if out.continuesAssistantTurn {
            out.continuesAssistantTurn = false
            if marker == assistant { return [] }
        }
        guard let carry = out.carry else { return marker }
        out.carry = nil
        return userTurn ? carry.user : carry.other + marker
    }

    /// The schema segment that follows a guided-generation prompt: `<|system|> Respond with
    /// JSON ... <|end|>`, or nothing when the request left the schema out of the prompt.
    ///
    /// It comes after the prompt, not in the instructions: a schema that changes between
    /// requests then never invalidates the instructions' or the history's cache, and a
    /// session that declares its schema once in its instructions can send
    /// `includeSchemaInPrompt: false` and pay nothing per request.
    func schemaTokens(_ format: Transcript.ResponseFormat?) -> [Int] {
        guard let format, format.isIncludedInPrompt else { return [] }
        // The `[INST]` formats have no system turn but the first: theirs is a user turn.
        return systemCarry == nil ? system + text(Self.describe(format)) + close : user + text(Self.describe(format)) + userClose
    }

    static func describe(_ format: Transcript.ResponseFormat) -> String {
        "Respond with JSON for \(format.name): \(SchemaText.render(format.schema.root))"
    }

    /// A prompt prefix (no closing marker), for prewarming, after `out`.
    func renderPromptPrefix(_ prefix: String, into out: inout RenderedPrompt) {
        out.append(opening(user, userTurn: true, &out) + text(prefix), as: .prompt)
    }

    /// A tool as the model reads it: a line of text, or for JSON calls a line of JSON (the
    /// `first` tool's after a sentence on how to call), each tool its own segment, so a tool that
    /// changes, or one added after the others, invalidates from its own line.
    func describe(_ d: Transcript.ToolDefinition, first: Bool) -> String {
        guard callFormat != .plain else {
            return d.argumentsSchema.isEmpty ? "Tool \(d.name): \(d.description)" : "Tool \(d.name): \(d.description) Arguments: \(d.argumentsSchema)"
        }
        var line = #"{"type": "function", "function": {"name": "#
        GeneratedContent.quote(d.name, into: &line)
        line += #", "description": "#
        GeneratedContent.quote(d.description, into: &line)
        if d.parameters != Transcript.ToolDefinition.noSchema, !d.argumentsSchema.isEmpty,
           let schema = Self.schemaText(d.parameters) {
            line += #", "parameters": "# + schema
        } else if !d.argumentsSchema.isEmpty {   // a definition known only by its text
            line += #", "parameters": "#
            GeneratedContent.quote(d.argumentsSchema, into: &line)
        }
        line += "}}"
        if callFormat == .toolCallsList { return (first ? "[" : ", ") + line }   // items of `[AVAILABLE_TOOLS]`'s list
        guard first else { return "\n" + line }
        switch callFormat {
        case .tagged:
            return "\n\nTools you may call, one JSON object a line. To call one, answer with <tool_call>"
                + #"{"name": its name, "arguments": a JSON object of its parameters}"#
                + "</tool_call>; its result comes back between <tool_response> and </tool_response>.\n" + line
        default:
            return "\n\nEnvironment: ipython\nTools you may call, one JSON object a line. To call one, answer with only "
                + #"{"name": its name, "parameters": a JSON object of its parameters}"#
                + "; its result comes back in an ipython turn.\n" + line
        }
    }

    /// The system message a ChatML chat template writes as one literal when a conversation has
    /// none, as Qwen2's, Qwen2.5's and SmolLM2's do:
    /// `{{ '<|im_start|>system\nYou are … assistant.<|im_end|>\n' }}`. Read without running the
    /// template: the first string literal that opens a system turn and holds its whole text (no
    /// quote, brace or `+` before `<|im_end|>`); `\n` escapes become newlines. `nil` when there is
    /// none, e.g. a template that only writes the conversation's own system message.
    static func defaultSystemMessage(inChatMLTemplate template: String) -> String? {
        let opening = #"<|im_start|>system\n"#   // as a Jinja string literal spells it
        var searched = template.startIndex
        while let found = template.range(of: opening, range: searched ..< template.endIndex) {
            searched = found.upperBound
            guard found.lowerBound > template.startIndex, "'\"".contains(template[template.index(before: found.lowerBound)]),
                  let close = template.range(of: "<|im_end|>", range: found.upperBound ..< template.endIndex) else { continue }
            let text = template[found.upperBound ..< close.lowerBound].replacingOccurrences(of: #"\n"#, with: "\n")
            guard !text.isEmpty, !text.contains(where: { "'\"{}+\\".contains($0) }) else { continue }
            return text
        }
        return nil
    }

    /// JSON Schema text of a tool's parameters, the same for the same schema.
    private static func schemaText(_ schema: GenerationSchema) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(schema)).map { String(decoding: $0, as: UTF8.self) }
    }
}

extension PromptRenderer {
    /// Whether token ids recorded with `assetIDs` are this model's: yes unless they name a
    /// `tokenizer:` and not this one (no asset ids: older saves, hand-built entries).
    func readsIDs(of assetIDs: [String]) -> Bool {
        !assetIDs.contains { $0.hasPrefix(Self.tokenizerAssetPrefix) } || assetIDs.contains(assetID)
    }

    /// `ids` when this tokenizer may have written them (``readsIDs(of:)``) and every one is in its
    /// vocabulary (a saved transcript may come from anywhere), else `nil`: the entry renders its text.
    func usable(_ ids: [Int]?, assetIDs: [String]) -> [Int]? {
        guard let ids, !ids.isEmpty, readsIDs(of: assetIDs), ids.allSatisfy({ 0 <= $0 && $0 < tokenizer.vocabSize }) else { return nil }
        return ids
    }
}

extension Transcript.ToolCalls {
    /// The tokens of the calls: the ids they were generated as when this model's tokenizer
    /// wrote them, else `<|tool_call|> name arguments <|end|>` (or the tagged form) per call.
    func tokenIDs(_ renderer: PromptRenderer) -> [Int] {
        if let ids = renderer.usable(tokenIDs, assetIDs: assetIDs) { return ids }
        return calls.flatMap {
            (renderer.toolCall.map { [$0] } ?? []) + renderer.text(renderer.callBody(name: $0.toolName, arguments: $0.arguments.jsonString))
                + [renderer.callEnd]
        }
    }
}

extension PromptRenderer {
    /// What goes between a call's opening token and ``callEnd``: `name arguments`, or a JSON
    /// object of the name and the arguments (compact, as the call grammar writes it).
    func callBody(name: String, arguments: String) -> String {
        guard let opening = callFormat.jsonOpening(name: name) else { return "\(name) \(arguments)" }
        return opening + arguments + (callFormat.jsonClosing ?? "")
    }
}
