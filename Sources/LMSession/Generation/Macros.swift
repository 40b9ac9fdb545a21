/// Makes a struct or an enum ``Generable``: the schema follows the declaration (stored
/// properties in order, `@Guide` descriptions and guides; an enum's cases as strings, or, when
/// cases carry values, as structures whose `type` property names the case), and the
/// conversions from and to ``GeneratedContent`` and the ``Generable/PartiallyGenerated``
/// form are written for you.
@attached(extension, conformances: Generable, names: named(init(_:)), named(generatedContent), named(generationSchema),
          named(PartiallyGenerated))
@attached(member, names: arbitrary)
public macro Generable(description: String? = nil) = #externalMacro(module: "LMSessionMacros", type: "GenerableMacro")

/// Describes a property of a ``Generable(description:)`` type for the model.
@attached(peer)
public macro Guide(description: String) = #externalMacro(module: "LMSessionMacros", type: "GuideMacro")

/// Describes a property and constrains its values with guides (spelled as ``GenerationGuide``'s:
/// `.range(1...5)`, `.count(2...3)`, `.anyOf([...])`, `.pattern(/.../)`, `.element(...)`),
/// enforced while decoding.
@attached(peer)
public macro Guide(description: String? = nil, _ guides: AnyGenerationGuide...) =
    #externalMacro(module: "LMSessionMacros", type: "GuideMacro")

/// Describes a string property and requires a whole match of `guides` (a regex literal).
@attached(peer)
public macro Guide<RegexOutput>(description: String? = nil, _ guides: Regex<RegexOutput>) =
    #externalMacro(module: "LMSessionMacros", type: "GuideMacro")

/// Declares a custom session property in an extension of
/// ``LanguageModelSession/SessionPropertyValues``: `@SessionPropertyEntry var name: Int = 0`,
/// then `@SessionProperty(\.name) var name` in a dynamic profile.
@attached(accessor, names: named(get), named(set))
public macro SessionPropertyEntry() = #externalMacro(module: "LMSessionMacros", type: "SessionPropertyEntryMacro")
