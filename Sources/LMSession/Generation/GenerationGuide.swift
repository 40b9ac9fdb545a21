import Foundation

/// A constraint on a generated value (a range, a count, a set of choices, a pattern),
/// enforced while the model decodes: the value cannot come out breaking it.
public struct GenerationGuide<Value>: Sendable {
    let constraints: [GuideConstraint]

    init(_ constraints: GuideConstraint...) { self.constraints = constraints }
}

extension GenerationGuide where Value == String {
    /// Exactly `value`.
    public static func constant(_ value: String) -> GenerationGuide<String> { .init(.choices([value])) }
    /// One of `values`, chosen by the model.
    public static func anyOf(_ values: [String]) -> GenerationGuide<String> { .init(.choices(values)) }
    /// A whole match of `regex`. The regex must be a literal or built from a string
    /// (its pattern text is what the decoder follows).
    public static func pattern<Output>(_ regex: Regex<Output>) -> GenerationGuide<String> {
        .init(.pattern(regex._literalPattern))
    }
}

extension GenerationGuide where Value == Int {
    /// At least `value`.
    public static func minimum(_ value: Int) -> GenerationGuide<Int> { .init(.minimum(Double(value))) }
    /// At most `value`.
    public static func maximum(_ value: Int) -> GenerationGuide<Int> { .init(.maximum(Double(value))) }
    /// Within `range`.
    public static func range(_ range: ClosedRange<Int>) -> GenerationGuide<Int> {
        .init(.minimum(Double(range.lowerBound)), .maximum(Double(range.upperBound)))
    }
}

extension GenerationGuide where Value == Double {
    /// At least `value`.
    public static func minimum(_ value: Double) -> GenerationGuide<Double> { .init(.minimum(value)) }
    /// At most `value`.
    public static func maximum(_ value: Double) -> GenerationGuide<Double> { .init(.maximum(value)) }
    /// Within `range`.
    public static func range(_ range: ClosedRange<Double>) -> GenerationGuide<Double> {
        .init(.minimum(range.lowerBound), .maximum(range.upperBound))
    }
}

extension GenerationGuide where Value == Float {
    /// At least `value`.
    public static func minimum(_ value: Float) -> GenerationGuide<Float> { .init(.minimum(Double(value))) }
    /// At most `value`.
    public static func maximum(_ value: Float) -> GenerationGuide<Float> { .init(.maximum(Double(value))) }
    /// Within `range`.
    public static func range(_ range: ClosedRange<Float>) -> GenerationGuide<Float> {
        .init(.minimum(Double(range.lowerBound)), .maximum(Double(range.upperBound)))
    }
}

extension GenerationGuide where Value == Decimal {
    /// At least `value`.
    public static func minimum(_ value: Decimal) -> GenerationGuide<Decimal> { .init(.minimum(value.doubleValue)) }
    /// At most `value`.
    public static func maximum(_ value: Decimal) -> GenerationGuide<Decimal> { .init(.maximum(value.doubleValue)) }
    /// Within `range`.
    public static func range(_ range: ClosedRange<Decimal>) -> GenerationGuide<Decimal> {
        .init(.minimum(range.lowerBound.doubleValue), .maximum(range.upperBound.doubleValue))
    }
}

extension GenerationGuide {
    /// At least `count` elements.
    public static func minimumCount<Element>(_ count: Int) -> GenerationGuide<[Element]> where Value == [Element] {
        .init(.minimumCount(count))
    }
    /// At most `count` elements.
    public static func maximumCount<Element>(_ count: Int) -> GenerationGuide<[Element]> where Value == [Element] {
        .init(.maximumCount(count))
    }
    /// Exactly `count` elements.
    public static func count<Element>(_ count: Int) -> GenerationGuide<[Element]> where Value == [Element] {
        .init(.minimumCount(count), .maximumCount(count))
    }
    /// Between `range.lowerBound` and `range.upperBound` elements.
    public static func count<Element>(_ range: ClosedRange<Int>) -> GenerationGuide<[Element]> where Value == [Element] {
        .init(.minimumCount(range.lowerBound), .maximumCount(range.upperBound))
    }
    /// `guide` applied to every element.
    public static func element<Element>(_ guide: GenerationGuide<Element>) -> GenerationGuide<[Element]> where Value == [Element] {
        .init(.element(guide.constraints))
    }
}

extension Decimal {
    var doubleValue: Double { NSDecimalNumber(decimal: self).doubleValue }
}
