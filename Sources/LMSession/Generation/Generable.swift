/// A type the model can generate: it has a ``generationSchema`` that guided generation
/// decodes against, converts from and to ``GeneratedContent``, and has a
/// ``PartiallyGenerated`` form for streamed snapshots.
///
/// Declare one with the ``Generable(description:)`` macro; the standard types (`String`,
/// `Bool`, `Int`, `Double`, `Float`, `Decimal`, arrays and optionals of generable types)
/// conform already.
public protocol Generable: ConvertibleFromGeneratedContent, ConvertibleToGeneratedContent, Sendable {
    /// The form of a value while it is being generated (every property optional, for a
    /// structure); `Self` for values that are shown only whole.
    associatedtype PartiallyGenerated: ConvertibleFromGeneratedContent & Sendable = Self
    /// The schema guided generation follows.
    static var generationSchema: GenerationSchema { get }
}

extension Generable {
    /// The value as a partially generated one (read back from its own content).
    public func asPartiallyGenerated() -> PartiallyGenerated {
        // A value's own content always reads back as its partial form.
        // swiftlint:disable:next force_try
        try! PartiallyGenerated(generatedContent)
    }
}
