import Foundation

/// Anonymous memory for large, long-lived storage that the kernels stream (weights, K/V caches,
/// the read probe): a private mapping of its own, aligned to 2 MiB and advised for transparent
/// huge pages where the system offers them (Linux's `madvise` mode).
///
/// Why: on 4 KiB pages a stream crosses a page every 4 KiB, and each crossing costs a TLB miss
/// and restarts the hardware prefetcher's stream; a two-core streaming read over 512 MiB ran at
/// 28–29.7 GB/s on huge pages against 25–26 on small ones (AMD EPYC Zen 1). Where the system
/// gives no huge pages the mapping simply stays on small ones.
enum LargeMapping {
    /// The huge-page size mappings are aligned to.
    static let alignment = 2 << 20

    /// Bytes from which buffers take a mapping of their own rather than `malloc`'s memory.
    static let threshold = 4 << 20

    /// Bytes that heap storage below ``threshold`` is aligned to: a cache line, so that rows whose
    /// stride is a multiple of 16 floats start on one and the kernels' 32- and 64-byte loads never
    /// straddle two lines. (`malloc` gives 16: a pass's activations, 3 MB each on `base`, started 16
    /// bytes past a page, and half the skinny tiles' 32-byte activation loads split a line. In a
    /// one-core harness on an Emerald Rapids, the packed tiles of 12 / 16 / 32 rows ran 1.06-1.09 /
    /// 1.19 / 1.16x as fast on aligned activations.)
    static let heapAlignment = 64

    /// `bytes` (> 0) of uninitialised heap memory aligned to ``heapAlignment``, freed with `free`;
    /// nil when the allocation fails.
    static func alignedAllocation(_ bytes: Int) -> UnsafeMutableRawPointer? {
        var raw: UnsafeMutableRawPointer?
        guard posix_memalign(&raw, heapAlignment, bytes) == 0 else { return nil }
        return raw
    }

    /// Maps `bytes` of zeroed memory, rounded up to whole huge pages; nil when the system refuses.
    /// - Returns: the start (aligned to ``alignment``) and the mapped length, for `munmap`.
    static func map(_ bytes: Int) -> (base: UnsafeMutableRawPointer, length: Int)? {
        guard bytes > 0, bytes <= Int.max - 2 * alignment else { return nil }
        let length = (bytes + alignment - 1) / alignment * alignment, reserved = length + alignment
        guard let raw = mmap(nil, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              raw != MAP_FAILED else { return nil }
        // Over-map by one huge page, then give back the unaligned head and the tail beyond it.
        let start = Int(bitPattern: raw), aligned = (start + alignment - 1) / alignment * alignment
        if aligned > start { munmap(raw, aligned - start) }
        if start + reserved > aligned + length {
            munmap(UnsafeMutableRawPointer(bitPattern: aligned + length), start + reserved - aligned - length)
        }
        let base = UnsafeMutableRawPointer(bitPattern: aligned)!
        #if os(Linux)
        _ = madvise(base, length, MADV_HUGEPAGE)   // advice only: small pages if the system declines
        #endif
        return (base, length)
    }
}
