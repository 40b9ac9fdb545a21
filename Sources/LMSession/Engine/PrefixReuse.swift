import LMRuntime

/// The decision of how much of the KV cache a rendered request keeps, and what the model's
/// shared prefix store added after it.
struct PrefixReuse: Equatable {
    /// Tokens kept from the session's own cache.
    var kept: Int
    /// Tokens the cache held beyond `kept` that are thrown away.
    var discarded: Int
    /// Why, when anything was not reused.
    var report: InvalidationReport?
    /// Tokens after `kept` copied from the shared prefix store instead of computed.
    var restored = PrefixStore.Restored()

    /// Tokens not computed: kept plus restored.
    var cached: Int { kept + restored.total }

    /// Records what the store restored after `kept`, in the report too.
    mutating func record(_ restored: PrefixStore.Restored) {
        self.restored = restored
        report?.restoredFromSharedStoreCount = restored.fromMemory
        report?.restoredFromDiskCount = restored.fromDisk
    }

    /// Compares `rendered` with what `cache` holds.
    ///
    /// Keeps the longest common prefix, but at most `rendered.count - 1` tokens when
    /// `needsLogits` (the last token must run to give the next token's logits). A
    /// profile switch keeps nothing. A report is made when cached tokens are thrown away
    /// or the cache was empty; a pure append, or re-running only the final token, has none.
    /// - Complexity: O(min(cache.count, rendered.count)).
    static func plan(_ rendered: RenderedPrompt, cache: some KVCache, profileSwitched: Bool,
                     needsLogits: Bool) -> PrefixReuse {
        let common = cache.commonPrefixLength(with: rendered.tokens)
        var kept = profileSwitched ? 0 : common
        if needsLogits { kept = min(kept, max(0, rendered.tokens.count - 1)) }
        let discarded = cache.count - kept
        let reason: InvalidationReport.Reason?
        if profileSwitched, cache.count > 0 {
            reason = .profileSwitch
        } else if cache.count == 0 {
            reason = rendered.tokens.isEmpty ? nil : .emptyCache
        } else if common < cache.count {
            reason = .prefixChanged
        } else {
            reason = nil   // everything cached is reused (at most the last token runs again)
        }
        let report = reason.map {
            InvalidationReport(position: kept, segment: rendered.segment(at: kept), reason: $0,
                               discardedTokenCount: discarded)
        }
        return PrefixReuse(kept: kept, discarded: discarded, report: report)
    }
}
