import Foundation

/// The guides `@Guide` accepts, spelled as in ``GenerationGuide``.
///
/// A macro's arguments are type-checked before the property's type is known, so
/// `@Guide(.count(3))` could not tell which `GenerationGuide<[Element]>` it means. `@Guide`
/// therefore takes these stand-ins, and ``Generable(description:)`` passes the same spelling
/// to the property's schema, where the property's type makes each one a typed
/// ``GenerationGuide``. Only the macro's declaration uses this type.
public struct AnyGenerationGuide: Sendable {
    init() {}

    /// Exactly `value`.
    public static func constant(_ value: String) -> Self { .init() }
    /// One of `values`.
    public static func anyOf(_ values: [String]) -> Self { .init() }
    /// A whole match of `regex`.
    public static func pattern<Output>(_ regex: Regex<Output>) -> Self { .init() }
    /// At least `value`.
    public static func minimum(_ value: Int) -> Self { .init() }
    /// At least `value`.
    public static func minimum(_ value: Double) -> Self { .init() }
    /// At least `value`.
    public static func minimum(_ value: Decimal) -> Self { .init() }
    /// At most `value`.
    public static func maximum(_ value: Int) -> Self { .init() }
    /// At most `value`.
    public static func maximum(_ value: Double) -> Self { .init() }
    /// At most `value`.
    public static func maximum(_ value: Decimal) -> Self { .init() }
    /// Within `range`.
    public static func range(_ range: ClosedRange<Int>) -> Self { .init() }
    /// Within `range`.
    public static func range(_ range: ClosedRange<Double>) -> Self { .init() }
    /// Within `range`.
    public static func range(_ range: ClosedRange<Decimal>) -> Self { .init() }
    /// At least `count` elements.
    public static func minimumCount(_ count: Int) -> Self { .init() }
    /// At most `count` elements.
    public static func maximumCount(_ count: Int) -> Self { .init() }
    /// Exactly `count` elements.
    public static func count(_ count: Int) -> Self { .init() }
    /// Between the range's bounds in elements.
    public static func count(_ range: ClosedRange<Int>) -> Self { .init() }
    /// `guide` on every element.
    public static func element(_ guide: Self) -> Self { .init() }
}
