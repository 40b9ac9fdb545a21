extension GeneratedContent {
    /// The content of one case of a `@Generable` enum whose cases carry values, written by the
    /// code the macro expands to (not meant to be called directly): a structure whose first
    /// property, `type`, is `name`, followed by `values` in order, those that are `nil` left out,
    /// as Foundation Models writes such a case (`{"type":"walk","distance":3}`).
    public static func _enumCase(_ name: String, values: [(String, (any ConvertibleToGeneratedContent)?)]) -> GeneratedContent {
        var properties = ["type": GeneratedContent(kind: .string(name))], order = ["type"]
        for case let (property, value?) in values {
            if properties.updateValue(value.generatedContent, forKey: property) == nil { order.append(property) }
        }
        return GeneratedContent(kind: .structure(properties: properties, orderedKeys: order))
    }
}
