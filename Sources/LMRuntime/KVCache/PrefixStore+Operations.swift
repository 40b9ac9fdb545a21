import Foundation

extension PrefixStore {
    /// Extends `cache` with the longest prefix of `tokens` whose rows the store holds, up to
    /// the last of `boundaries`, copying rows instead of computing them.
    ///
    /// The cache must hold a prefix of `tokens` (the caller truncates it to the common
    /// prefix first); only boundaries beyond `cache.count` count. Memory is searched first,
    /// token by token: the rows of position `i` depend on `tokens[0...i]` only, so an entry
    /// another sequence published is used as far as its tokens equal these, whether or not
    /// its end is one of `boundaries` (two sessions whose instructions differ only in their
    /// last line share every row above it). Then the disk tier, for anything longer: token by
    /// token too, by the files' token ids (indexed when the store opens, and on every write),
    /// and by key at `boundaries` for files whose ids the index could not read (such a file is
    /// checked, and removed if invalid). A file chain is decoded straight into the cache (no copy
    /// in between; the entries join memory when the sequence next publishes).
    /// - Parameters:
    ///   - cache: the sequence's cache, holding `tokens[0..<cache.count]`.
    ///   - tokens: the sequence's tokens.
    ///   - boundaries: ascending positions where a stored prefix may end (segment ends); the
    ///     last one bounds what is restored (a caller that needs the logits of the last token
    ///     leaves it out).
    /// - Returns: how many tokens were restored, and from where.
    /// - Complexity: O(`tokens.count`) to hash, O(entries) to index the stored entries by
    ///   parent, then each entry reached through whole matches is compared once from its start;
    ///   plus copying the restored rows.
    @discardableResult
    public func restore(into cache: some KVCache, tokens: [Int], boundaries: [Int]) -> Restored {
        let have = cache.count
        precondition(cache.tokens.elementsEqual(tokens.prefix(have)), "the cache must hold a prefix of the tokens")
        let candidates = Self.candidates(boundaries, above: have, within: tokens.count)
        guard !candidates.isEmpty, cache.layerCount == layerCount, cache.kvDim == kvDim else { return Restored() }
        let keys = PrefixKey.keys(fingerprint: fingerprint, tokens: tokens, at: candidates)
        let limit = candidates[candidates.count - 1]
        let (chain, matched) = acquireLongestMatch(tokens: tokens, limit: limit, above: have)
        defer { release(chain) }
        let memoryEnd = max(have, matched)
        // Disk only for more than memory holds; its rows go straight into the cache's scratch
        // rows (beyond `have`, not yet counted), so a failure half-way leaves the cache as it was.
        var diskEnd = memoryEnd, diskPartial = false
        if let disk {
            // Token by token by the files' indexed ids, as far as they agree;
            // the rows the file holds beyond that land in scratch rows, overwritten by the pass.
            for match in disk.longestMatches(tokens, limit: limit, above: memoryEnd) where match.tokens.count <= cache.capacity {
                guard (try? cache.reserve(positions: max(match.tokens.count, min(tokens.count, cache.capacity)))) != nil else { break }
                if disk.restore(match.key, tokens: match.tokens, into: cache, from: memoryEnd) {
                    diskEnd = match.end
                    diskPartial = match.end < match.tokens.count
                    break
                }
            }
            // Then whole entries by key: files whose ids the index could not read (checked now, removed if invalid).
            for (boundary, key) in zip(candidates, keys).reversed() where boundary > diskEnd && disk.contains(key) {
                // Room for every token, not just the restored ones: growing after the restore would copy them all.
                guard (try? cache.reserve(positions: max(boundary, min(tokens.count, cache.capacity)))) != nil else {
                    break   // no room: recompute instead
                }
                if disk.restore(key, tokens: tokens, into: cache, from: memoryEnd) {
                    diskEnd = boundary
                    diskPartial = false
                    break
                }
            }
        }
        guard diskEnd > have, (try? cache.reserve(positions: diskEnd)) != nil else { return Restored() }
        for entry in chain {   // every one ends beyond `have`; the last may be used only part of the way
            let span = max(entry.start, have) ..< min(entry.end, memoryEnd)
            for layer in 0 ..< layerCount {
                let (keys, values) = rows(of: entry, layer: layer)
                let stored = span.lowerBound - entry.start ..< span.upperBound - entry.start
                Kernels.copy(keys.rows(stored), into: cache.keys(layer: layer).rows(span))
                Kernels.copy(values.rows(stored), into: cache.values(layer: layer).rows(span))
            }
        }
        cache.append(tokens[have ..< diskEnd])
        let restored = Restored(fromMemory: memoryEnd - have, fromDisk: diskEnd - memoryEnd)
        let partial = diskEnd > memoryEnd ? diskPartial : chain.last.map { memoryEnd < $0.end } ?? false
        state.withLock { s in
            if restored.fromDisk > 0 { s.statistics.diskHits += 1 } else { s.statistics.memoryHits += 1 }
            if partial { s.statistics.partialHits += 1 }
            s.statistics.tokensFromMemory += restored.fromMemory
            s.statistics.tokensFromDisk += restored.fromDisk
        }
        return restored
    }

    /// Stores the rows of `cache` up to each of `boundaries` that is not stored yet, each entry
    /// extending the deepest stored entry its tokens begin with (splitting one they part from
    /// inside, so shared rows are held once); with a disk tier, new entries are written in the
    /// background, and the file of an entry that was split is rewritten as its tail. A boundary the byte limit has no room for (all else pinned or in use) is
    /// not stored, nor are the ones after it.
    /// - Parameters:
    ///   - cache: the sequence's cache.
    ///   - boundaries: ascending positions within `cache.count` (segment ends).
    /// - Complexity: O(`cache.count`) to hash, plus copying the new rows; below the last boundary
    ///   already stored, O(entries) for each entry descended, and a split copies that entry's rows.
    public func publish(_ cache: some KVCache, boundaries: [Int]) {
        let tokens = cache.tokens
        let candidates = Self.candidates(boundaries, above: 0, within: tokens.count)
        guard !candidates.isEmpty, cache.layerCount == layerCount, cache.kvDim == kvDim else { return }
        let keys = PrefixKey.keys(fingerprint: fingerprint, tokens: tokens, at: candidates)
        var written: [Entry] = [], tails: [Entry] = []
        state.withLock { s in
            var parent: Entry?
            for (boundary, key) in zip(candidates, keys) {
                if let existing = s.entries[key], existing.tokens.elementsEqual(tokens[0 ..< boundary]) {
                    s.clock += 1
                    existing.lastUse = s.clock
                    parent = existing
                    continue
                }
                // Rows already held for the tokens beyond `parent` are shared, not stored again.
                parent = deepestSharedEntry(below: parent, tokens: tokens, limit: boundary, heads: &written, tails: &tails, in: &s)
                let start = parent?.end ?? 0
                if start == boundary { continue }   // a split left an entry ending exactly here
                guard makeRoom(for: byteCount(positions: boundary - start), keeping: parent, in: &s) else {
                    s.statistics.refusedInsertions += 1
                    return
                }
                let entry = Entry(key: key, parent: parent?.key, tokens: Array(tokens[0 ..< boundary]), start: start,
                                  rows: FloatBuffer(count: 2 * layerCount * kvDim * (boundary - start)))
                for layer in 0 ..< layerCount {
                    let (keys, values) = rows(of: entry, layer: layer)
                    Kernels.copy(cache.keys(layer: layer).rows(start ..< boundary), into: keys)
                    Kernels.copy(cache.values(layer: layer).rows(start ..< boundary), into: values)
                }
                insert(entry, in: &s)
                written.append(entry)
                parent = entry
            }
        }
        for entry in written { disk?.write(entry, rows: rowViews(of: entry)) }
        for tail in tails { disk?.shrink(to: tail, rows: rowViews(of: tail)) }   // after their heads' files
    }

    /// The deepest entry whose tokens are a prefix of `tokens[0..<limit]`, from `parent` (one
    /// already) down through the children that match whole. A child that matches only part of the
    /// way is split where the tokens part (see ``split(_:at:in:)``), so the rows both sequences
    /// share are held once and the new entry extends the shared part; the new head is appended to
    /// `heads` (it needs a file of its own on disk, as the new entry's parent) and the tail to
    /// `tails` (its file, which holds the rows from the old start, is rewritten without the head's).
    /// - Complexity: O(entries) for each level descended, plus the tokens compared.
    private func deepestSharedEntry(below parent: Entry?, tokens: [Int], limit: Int, heads: inout [Entry],
                                    tails: inout [Entry], in s: inout State) -> Entry? {
        var parent = parent
        while true {
            let start = parent?.end ?? 0
            guard start < limit, let child = s.entries.values.first(where: {
                $0.parent == parent?.key && $0.tokens[start] == tokens[start]
            }) else { return parent }
            let stop = min(child.end, limit)
            var matched = start + 1
            while matched < stop, child.tokens[matched] == tokens[matched] { matched += 1 }
            s.clock += 1
            guard matched < child.end else {
                child.lastUse = s.clock
                parent = child
                continue
            }
            guard let (head, tail) = split(child, at: matched, in: &s) else { return parent }
            head.lastUse = s.clock
            heads.append(head)
            tails.append(tail)
            return head
        }
    }

    /// Replaces `entry` by two: a head holding its rows up to `position` (a new key, the prefix
    /// `tokens[0..<position]`) and a tail holding the rest under the old key, with the old entry's
    /// children, pins and last use. The bytes held do not change. A reader still copying from
    /// the old entry keeps its rows alive (the chain it holds names the old object). Returns
    /// `nil`, changing nothing, if an entry for the head's prefix exists already.
    private func split(_ entry: Entry, at position: Int, in s: inout State) -> (head: Entry, tail: Entry)? {
        precondition(entry.start < position && position < entry.end, "a split leaves rows on both sides")
        let headKey = PrefixKey.keys(fingerprint: fingerprint, tokens: entry.tokens, at: [position])[0]
        guard s.entries[headKey] == nil else { return nil }
        let head = Entry(key: headKey, parent: entry.parent, tokens: Array(entry.tokens[0 ..< position]), start: entry.start,
                         rows: FloatBuffer(count: 2 * layerCount * kvDim * (position - entry.start)))
        let tail = Entry(key: entry.key, parent: headKey, tokens: entry.tokens, start: position,
                         rows: FloatBuffer(count: 2 * layerCount * kvDim * (entry.end - position)))
        for layer in 0 ..< layerCount {
            let (keys, values) = rows(of: entry, layer: layer)
            let (headKeys, headValues) = rows(of: head, layer: layer), (tailKeys, tailValues) = rows(of: tail, layer: layer)
            let cut = position - entry.start
            Kernels.copy(keys.rows(0 ..< cut), into: headKeys)
            Kernels.copy(values.rows(0 ..< cut), into: headValues)
            Kernels.copy(keys.rows(cut ..< keys.rows), into: tailKeys)
            Kernels.copy(values.rows(cut ..< values.rows), into: tailValues)
        }
        (head.lastUse, head.children) = (entry.lastUse, 1)
        (tail.lastUse, tail.children, tail.pins) = (entry.lastUse, entry.children, entry.pins)
        s.entries[headKey] = head
        s.entries[entry.key] = tail
        s.statistics.splits += 1
        return (head, tail)
    }

    /// Keeps the entry for exactly `tokens` (and so its ancestors) from eviction until as many
    /// ``unpin(_:)`` calls. Returns `false` when no such entry is stored.
    @discardableResult
    public func pin(_ tokens: [Int]) -> Bool { adjustPins(tokens, by: 1) }

    /// Undoes one ``pin(_:)``. Returns `false` when the entry is not stored or not pinned.
    @discardableResult
    public func unpin(_ tokens: [Int]) -> Bool { adjustPins(tokens, by: -1) }

    /// The longest stored prefix of `tokens` ending at one of `boundaries`, in memory only
    /// (for reports and tests; nothing is copied).
    public func storedPrefixLength(of tokens: [Int], boundaries: [Int]) -> Int {
        let candidates = Self.candidates(boundaries, above: 0, within: tokens.count)
        let keys = PrefixKey.keys(fingerprint: fingerprint, tokens: tokens, at: candidates)
        return state.withLock { s in
            Array(zip(candidates, keys)).last { s.entries[$1]?.tokens.elementsEqual(tokens[0 ..< $0]) == true }?.0 ?? 0
        }
    }

    // MARK: - Machinery

    /// The boundaries in `(above, within]`, ascending and unique.
    static func candidates(_ boundaries: [Int], above: Int, within: Int) -> [Int] {
        Array(Set(boundaries.filter { $0 > above && $0 <= within })).sorted()
    }

    /// Key and value rows of `entry` for `layer`, `[end - start, kvDim]` each.
    func rows(of entry: Entry, layer: Int) -> (keys: Matrix, values: Matrix) {
        let n = entry.end - entry.start, size = n * kvDim
        return (Matrix(buffer: entry.rows, offset: 2 * layer * size, rows: n, cols: kvDim),
                Matrix(buffer: entry.rows, offset: (2 * layer + 1) * size, rows: n, cols: kvDim))
    }

    func rowViews(of entry: Entry) -> [Matrix] {
        (0 ..< layerCount).flatMap { layer -> [Matrix] in let (k, v) = rows(of: entry, layer: layer); return [k, v] }
    }

    /// The stored entries that share the longest prefix with `tokens[0..<limit]`: the chain from
    /// position 0 to the entry whose tokens agree furthest (every entry before it matching whole,
    /// it possibly only part of the way), and where the agreement ends. The entries ending beyond
    /// `above` (the ones a restore copies from) are returned, marked as being read.
    ///
    /// A depth-first walk from the root: an entry's children are compared only when it matches
    /// whole, so no token is compared twice on one path, and every entry is a candidate, not just
    /// the best child at each level (a sibling may match further inside itself while the whole
    /// one's child goes further still). Where two entries agree equally far, the more recently used
    /// wins, so the same history always restores the same rows.
    private func acquireLongestMatch(tokens: [Int], limit: Int, above: Int) -> (chain: [Entry], end: Int) {
        state.withLock { s in
            var children: [PrefixKey?: [Entry]] = [:]
            for entry in s.entries.values { children[entry.parent, default: []].append(entry) }
            var best: (entry: Entry, end: Int)?
            var pending = children[nil] ?? []   // entries whose parent matched whole
            while let entry = pending.popLast() {
                let stop = min(entry.end, limit)
                var matched = entry.start
                while matched < stop, entry.tokens[matched] == tokens[matched] { matched += 1 }
                guard matched > entry.start else { continue }
                if best.map({ matched > $0.end || (matched == $0.end && entry.lastUse > $0.entry.lastUse) }) ?? true {
                    best = (entry, matched)
                }
                if matched == entry.end { pending += children[entry.key] ?? [] }
            }
            guard let (last, end) = best, end > above else { return ([], 0) }
            var chain = [last]
            while let first = chain.first, first.start > above, let parent = first.parent.flatMap({ s.entries[$0] }) {
                chain.insert(parent, at: 0)
            }
            s.clock += 1
            for entry in chain { entry.readers += 1; entry.lastUse = s.clock }
            return (chain, end)
        }
    }

    private func release(_ chain: [Entry]) {
        state.withLock { _ in for entry in chain { entry.readers -= 1 } }
    }

    private func insert(_ entry: Entry, in s: inout State) {
        s.clock += 1
        entry.lastUse = s.clock
        s.entries[entry.key] = entry
        s.byteCount += entry.byteCount
        if let parent = entry.parent { s.entries[parent]?.children += 1 }
    }

    /// Evicts least recently used entries until `bytes` more fit; `false` if they cannot. `parent`,
    /// the entry the new one will extend, is held meanwhile: until its child is in, it is a leaf
    /// like any other, and evicting it would leave the child without a chain to position 0.
    private func makeRoom(for bytes: Int, keeping parent: Entry?, in s: inout State) -> Bool {
        guard bytes <= configuration.memoryByteLimit else { return false }
        parent?.readers += 1
        defer { parent?.readers -= 1 }
        while s.byteCount + bytes > configuration.memoryByteLimit {
            guard evictOne(&s) else { return false }
            s.statistics.evictions += 1
        }
        return true
    }

    /// Removes the least recently used entry that is a leaf, unpinned and not being read.
    func evictOne(_ s: inout State) -> Bool {
        guard let victim = s.entries.values.filter({ $0.children == 0 && $0.pins == 0 && $0.readers == 0 })
            .min(by: { $0.lastUse < $1.lastUse }) else { return false }
        s.entries[victim.key] = nil
        s.byteCount -= victim.byteCount
        if let parent = victim.parent { s.entries[parent]?.children -= 1 }
        return true
    }

    private func adjustPins(_ tokens: [Int], by delta: Int) -> Bool {
        let key = PrefixKey.keys(fingerprint: fingerprint, tokens: tokens, at: [tokens.count])[0]
        return state.withLock { s in
            guard let entry = s.entries[key], entry.tokens == tokens, entry.pins + delta >= 0 else { return false }
            entry.pins += delta
            return true
        }
    }
}
