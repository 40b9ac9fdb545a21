/// Dynamic instructions given as a closure, re-run for every request.
public struct DynamicInstructionsClosure: DynamicInstructions, @unchecked Sendable {
    let make: () -> InstructionGroup
    /// Wraps a builder closure.
    public init(@DynamicInstructionsBuilder _ make: @escaping () -> InstructionGroup) { self.make = make }
    /// Evaluates the closure now.
    public func components() -> [InstructionComponent] { make().parts }
}
