/// One piece of resolved instructions: a text or a tool, in declaration order.
public enum InstructionComponent: Sendable {
    /// Instruction text.
    case text(String)
    /// A tool offered to the model.
    case tool(any Tool)
}

/// Instructions and tools that are re-evaluated before every request.
///
/// Conform and implement ``body`` with a ``DynamicInstructionsBuilder``: put content that
/// never changes first and conditional content last, because every token after the first
/// change is recomputed. ``Instructions``, tools, arrays of tools, `if`/`else`, optionals
/// and ``ForEach`` may appear in a body.
public protocol DynamicInstructions {
    /// The type of ``body``.
    associatedtype Body: DynamicInstructions = Never
    /// The content, evaluated anew for each request.
    @DynamicInstructionsBuilder var body: Body { get }
    /// The resolved texts and tools, in declaration order.
    func components() -> [InstructionComponent]
}

extension DynamicInstructions {
    /// Resolves ``body``.
    public func components() -> [InstructionComponent] { body.components() }
}

extension Never: DynamicInstructions {
    /// Never called (an explicit `return` opts out of the inferred builder).
    public var body: Never { return fatalError("unreachable: Never has no value") }
    /// No components.
    public func components() -> [InstructionComponent] { [] }
}

extension DynamicInstructions where Body == Never {
    /// Primitive instructions have no body; they implement ``components()`` directly.
    public var body: Never { fatalError("\(Self.self) is primitive: it implements components() and has no body") }
}

/// A sequence of instructions and tools, the result of a builder block.
public struct InstructionGroup: DynamicInstructions {
    let parts: [InstructionComponent]
    /// The components, in order.
    public func components() -> [InstructionComponent] { parts }
}

/// One item of dynamic instructions per element of a collection.
public struct ForEach<Data: Sequence>: DynamicInstructions {
    let parts: [InstructionComponent]

    /// Builds content for each element of `data`.
    public init<Content: DynamicInstructions>(_ data: Data,
                                              @DynamicInstructionsBuilder content: (Data.Element) -> Content) {
        parts = data.flatMap { content($0).components() }
    }

    /// The components, in order.
    public func components() -> [InstructionComponent] { parts }
}

extension Array: DynamicInstructions where Element: DynamicInstructions {
    /// The elements' components, in order.
    public func components() -> [InstructionComponent] { flatMap { $0.components() } }
}

extension Optional: DynamicInstructions where Wrapped: DynamicInstructions {
    /// The wrapped value's components, or none.
    public func components() -> [InstructionComponent] { self?.components() ?? [] }
}

/// Builds ``DynamicInstructions`` from instructions, tools, conditionals and loops.
@resultBuilder
public enum DynamicInstructionsBuilder {
    /// Any dynamic instructions (instructions, a tool, an array of tools, ...).
    public static func buildExpression(_ content: some DynamicInstructions) -> InstructionGroup {
        InstructionGroup(parts: content.components())
    }
    /// An array of tools of mixed types.
    public static func buildExpression(_ tools: [any Tool]) -> InstructionGroup {
        InstructionGroup(parts: tools.map(InstructionComponent.tool))
    }
    /// A plain string is an instruction text.
    public static func buildExpression(_ text: String) -> InstructionGroup { InstructionGroup(parts: [.text(text)]) }
    /// Items in declaration order.
    public static func buildBlock(_ parts: InstructionGroup...) -> InstructionGroup {
        InstructionGroup(parts: parts.flatMap(\.parts))
    }
    /// An `if` without `else`.
    public static func buildOptional(_ part: InstructionGroup?) -> InstructionGroup { part ?? InstructionGroup(parts: []) }
    /// The `if` branch.
    public static func buildEither(first: InstructionGroup) -> InstructionGroup { first }
    /// The `else` branch.
    public static func buildEither(second: InstructionGroup) -> InstructionGroup { second }
    /// A `for` loop.
    public static func buildArray(_ parts: [InstructionGroup]) -> InstructionGroup {
        InstructionGroup(parts: parts.flatMap(\.parts))
    }
    /// `if #available`.
    public static func buildLimitedAvailability(_ part: InstructionGroup) -> InstructionGroup { part }
}

/// Dynamic instructions given as a closure, re-run for every request.
public struct DynamicInstructionsClosure: DynamicInstructions, @unchecked Sendable {
    let make: () -> InstructionGroup
    /// Wraps a builder closure.
    public init(@DynamicInstructionsBuilder _ make: @escaping () -> InstructionGroup) { self.make = make }
    /// Evaluates the closure now.
    public func components() -> [InstructionComponent] { make().parts }
}
