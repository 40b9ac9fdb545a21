/// Type-erased dynamic instructions: the wrapped value's body is still evaluated anew for
/// every request.
public struct AnyDynamicInstructions: DynamicInstructions {
    private let resolve: () -> [InstructionComponent]

    /// Wraps `dynamicInstructions`.
    public init(erasing dynamicInstructions: some DynamicInstructions) {
        resolve = { dynamicInstructions.components() }
    }

    /// The wrapped instructions' components, evaluated now.
    public func components() -> [InstructionComponent] { resolve() }
}
