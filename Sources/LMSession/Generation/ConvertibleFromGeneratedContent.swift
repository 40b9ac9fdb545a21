/// A type that can be read from ``GeneratedContent``.
public protocol ConvertibleFromGeneratedContent: SendableMetatype {
    /// Reads a value from generated content.
    /// - Throws: ``GeneratedContentError`` when the content does not have this type's shape.
    init(_ content: GeneratedContent) throws
}
