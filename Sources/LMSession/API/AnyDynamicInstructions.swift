/// Type-erased dynamic instructions: the wrapped value's body is still evaluated anew for
/// every request.
public struct AnyDynamicInstructions: DynamicInstructions {
    private let resolve: () -> [InstructionComponent]

    /// Wraps `dynamicInstructions`.
    public init(_ dynamicInstructions: any DynamicInstructions) {
        resolve = { dynamicInstructions.components() }
    }

    /// Wraps `dynamicInstructions`.
    public init(erasing dynamicInstructions: some DynamicInstructions) { self.init(dynamicInstructions) }

    /// The wrapped instructions' components, evaluated now.
    public func components() -> [InstructionComponent] { resolve() }
}
