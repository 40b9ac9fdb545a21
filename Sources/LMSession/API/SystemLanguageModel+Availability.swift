import Foundation
import LMRuntime

extension SystemLanguageModel {
    /// Whether the model can run, in FoundationModels' shape.
    public enum Availability: Sendable, Equatable {
        /// The model loads and runs.
        case available
        /// The model cannot run, and why.
        case unavailable(UnavailableReason)

        /// Why a model is unavailable.
        public enum UnavailableReason: Sendable, Equatable {
            /// The device cannot run the model (never reported here).
            case deviceNotEligible
            /// The user turned the feature off (never reported here).
            case appleIntelligenceNotEnabled
            /// The model is still being prepared (never reported here: models load on demand).
            case modelNotReady
            /// The model's files are missing or invalid, or it does not fit the memory limit.
            case modelFilesInvalid(ModelLoadError)
        }
    }

    /// What the model is for (kept for source compatibility; every use case runs the same model).
    public struct UseCase: Sendable, Equatable {
        let name: String
        /// General conversation and generation.
        public static let general = UseCase(name: "general")
        /// Tagging and extracting content.
        public static let contentTagging = UseCase(name: "contentTagging")
    }

    /// Content guardrails (kept for source compatibility; the local models have none).
    public struct Guardrails: Sendable, Equatable {
        let name: String
        /// The default guardrails.
        public static let `default` = Guardrails(name: "default")
        /// Guardrails that let content be transformed more freely.
        public static let permissiveContentTransformations = Guardrails(name: "permissiveContentTransformations")
    }

    /// The bundled `base` model for a use case (every use case runs the same model here).
    public convenience init(useCase: UseCase = .general, guardrails: Guardrails = .default) {
        self.init(named: "base")
    }

    /// Whether the model can run: it loads it (once) and reports a load failure as
    /// `.unavailable(.modelFilesInvalid(error))` instead of throwing later.
    public var availability: Availability {
        do {
            _ = try loaded()
            return .available
        } catch let error as ModelLoadError {
            return .unavailable(.modelFilesInvalid(error))
        } catch {
            return .unavailable(.modelFilesInvalid(.unreadable(path: "", reason: "\(error)")))
        }
    }

    /// Whether ``availability`` is `.available`.
    public var isAvailable: Bool { availability == .available }

    /// The languages the bundled tokenizer and models were built for: English.
    public var supportedLanguages: Set<Locale.Language> { [Locale.Language(identifier: "en")] }

    /// Whether `locale`'s language is one of ``supportedLanguages``.
    public func supportsLocale(_ locale: Locale = .current) -> Bool {
        supportedLanguages.contains { $0.languageCode == locale.language.languageCode }
    }
}
