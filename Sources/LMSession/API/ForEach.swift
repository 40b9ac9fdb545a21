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
