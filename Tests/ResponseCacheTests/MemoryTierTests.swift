import Foundation
@testable import ResponseCache
import Testing

/// The memory tier against the plainest least-recently-used list, over random operations, with
/// every invariant checked after each one.
struct MemoryTierTests {
    /// The reference: an array in order of use, least recent first.
    struct ReferenceLRU {
        let entryLimit: Int, byteLimit: Int
        var order: [String] = []
        var sizes: [String: Int] = [:]
        var bytes: Int { order.reduce(0) { $0 + sizes[$1]! } }

        mutating func get(_ digest: String) -> Bool {
            guard let at = order.firstIndex(of: digest) else { return false }
            order.append(order.remove(at: at))
            return true
        }

        mutating func put(_ digest: String, bytes: Int) -> Int {
            remove(digest)
            order.append(digest)
            sizes[digest] = bytes
            var evicted = 0
            while order.count > entryLimit || (self.bytes > byteLimit && order.count > 1) {
                remove(order[0])
                evicted += 1
            }
            return evicted
        }

        mutating func remove(_ digest: String) { order.removeAll { $0 == digest } }
    }

    func entry(_ name: String, bytes: Int) -> MemoryTier<String>.Entry {
        .init(key: CacheKey(parts: [name]), value: name, created: Date(), bytes: bytes)
    }

    @Test(arguments: [1, 2, 3])
    func operations_matchTheReferenceLRU(seed: UInt64) {
        var tier = MemoryTier<String>(entryLimit: 6, byteLimit: 400)
        var reference = ReferenceLRU(entryLimit: 6, byteLimit: 400)
        var state = seed &* 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let names = (0 ..< 10).map { "entry \($0)" }
        var evictions = 0
        for step in 0 ..< 5_000 {
            let name = names[next(names.count)], digest = CacheKey(parts: [name]).digest
            switch next(10) {
            case 0 ..< 4:
                #expect((tier.get(digest) != nil) == reference.get(digest), "step \(step)")
            case 4 ..< 8:
                let bytes = 10 + next(120)
                let evicted = tier.put(entry(name, bytes: bytes))
                #expect(evicted == reference.put(digest, bytes: bytes), "step \(step)")
                evictions += evicted
            case 8:
                tier.remove(digest)
                reference.remove(digest)
            default:
                let cut = next(names.count)
                tier.removeAll { $0.key == CacheKey(parts: [names[cut]]) }
                reference.remove(CacheKey(parts: [names[cut]]).digest)
            }
            #expect(tier.digestsByUse == reference.order, "step \(step)")
            #expect(tier.count == reference.order.count && tier.bytes == reference.bytes, "step \(step)")
            #expect(tier.count <= 6 && (tier.bytes <= 400 || tier.count == 1), "step \(step)")
        }
        #expect(evictions > 100)
    }
}
