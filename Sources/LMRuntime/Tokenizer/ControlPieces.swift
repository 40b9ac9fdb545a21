/// Control pieces the bundled tokenizer reserves right after the byte tokens.
///
/// They mark structure (turns, tool calls) in rendered prompts. The encoder
/// never produces them from text, because no merge builds them, so a user
/// cannot forge one by typing its spelling; they are inserted by id.
public enum ControlPieces {
    /// Starts the system/instructions segment.
    public static let system = "<|system|>"
    /// Starts a user turn.
    public static let user = "<|user|>"
    /// Starts a model turn.
    public static let assistant = "<|assistant|>"
    /// Starts a tool's output.
    public static let tool = "<|tool|>"
    /// Starts a tool call emitted by the model.
    public static let toolCall = "<|tool_call|>"
    /// Ends a segment.
    public static let end = "<|end|>"

    /// All control pieces in id order (ids 259, 260, ... in the bundled tokenizer).
    public static let all = [system, user, assistant, tool, toolCall, end]
}
