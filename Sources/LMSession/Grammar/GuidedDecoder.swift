import Foundation
import LMRuntime

/// One structured response's decoding state: the grammar position, the masker, and the
/// time spent computing masks. Owned by a single request (not shared between threads at once).
final class GuidedDecoder: @unchecked Sendable {
    let masker: TokenMasker
    private(set) var state: GrammarState
    private var mask: [UInt64]
    /// The token that ends a response; allowed only where the value may end (a top-level number).
    let stopToken: Int
    /// Nanoseconds per mask (computation and application to the logits), in order.
    private(set) var maskNanoseconds: [UInt64] = []

    init(masker: TokenMasker, stopToken: Int) {
        self.masker = masker
        state = GrammarState(masker.grammar)
        mask = [UInt64](repeating: 0, count: masker.vocabulary.wordCount)
        self.stopToken = stopToken
    }

    /// The fewest tokens that can still finish the value.
    var remaining: Int { state.remaining }
    var isFinished: Bool { state.isFinished }

    /// Computes the allowed tokens for `budget` tokens left and sets every other logit to -∞.
    func constrain(_ logits: Matrix, budget: Int) {
        let start = DispatchTimeNanoseconds.now
        masker.mask(state, budget: budget, into: &mask)
        if state.canStop { mask[stopToken >> 6] |= 1 << UInt64(stopToken & 63) }
        Kernels.mask(logits, allowed: mask)
        maskNanoseconds.append(DispatchTimeNanoseconds.now - start)
    }

    /// Advances past `token`; false when the grammar refuses it (never for an allowed token).
    @discardableResult
    func accept(_ token: Int) -> Bool {
        token == stopToken ? state.canStop : state.feed(masker.vocabulary.bytes[token])
    }
}

/// A monotonic clock in nanoseconds, cheap enough to read per token.
enum DispatchTimeNanoseconds {
    static var now: UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }
}
