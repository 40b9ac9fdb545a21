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

extension Array: DynamicInstructions where Element: DynamicInstructions {
    /// The elements' components, in order.
    public func components() -> [InstructionComponent] { flatMap { $0.components() } }
}

extension Optional: DynamicInstructions where Wrapped: DynamicInstructions {
    /// The wrapped value's components, or none.
    public func components() -> [InstructionComponent] { self?.components() ?? [] }
}
