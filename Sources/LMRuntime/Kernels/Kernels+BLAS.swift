import CKernels
import COpenBLAS
import Foundation

/// The numeric kernels of the runtime: the only code that touches raw pointers or `cblas_*`.
///
/// Every kernel takes row-major ``Matrix`` views and writes into views it is
/// given, so nothing here allocates. Shapes are stated as `[rows, cols]`.
package enum Kernels {
    /// `c = alpha * a · bᵀ + beta * c` for float32 `b` (see ``matmul(_:transposed:into:alpha:beta:scratch:)``).
    package static func matmul(_ a: Matrix, transposed b: Matrix, into c: Matrix, alpha: Float = 1, beta: Float = 0) {
        matmul(a, transposed: WeightMatrix(b), into: c, alpha: alpha, beta: beta)
    }

    /// `c = alpha * a · bᵀ + beta * c`: the projection kernel (weights stored `[out, in]`).
    ///
    /// Few rows of `a` (decode, short prefills) go through the skinny kernel, which streams each
    /// weight row once, in float32 or half. More rows on packed weights, up to ``blockedSkinnyRows``,
    /// run the skinny kernel a block of weight rows at a time (`blockedSkinny`); beyond that they go
    /// to sgemm, packed and half weights then unpacked or converted a block of rows at a time into
    /// `scratch` (without scratch the skinny kernel takes any rows).
    /// - Parameters:
    ///   - a: activations `[M, K]`.
    ///   - b: weights `[N, K]`.
    ///   - c: output `[M, N]`; with `beta == 1` the product is added to it (residuals).
    ///   - scratch: conversion blocks for half weights (``HalfScratch``), one per band.
    package static func matmul(_ a: Matrix, transposed b: WeightMatrix, into c: Matrix,
                              alpha: Float = 1, beta: Float = 0, scratch: HalfScratch? = nil) {
        precondition(a.cols == b.cols && c.rows == a.rows && c.cols == b.rows, "matmul shape mismatch")
        projectionBands(a, transposed: b) { worker, cols, following in
            singleThreadMatmul(a, transposed: b.rows(cols), into: c.columns(cols), alpha: alpha, beta: beta,
                               block: scratch?.block(worker), following: min(following, prefetchedRows))
        }
    }

    /// `[c₀ | c₁ | c₂] = a · bᵀ`, the output's columns landing in three separate matrices:
    /// the fused Q/K/V projection writes queries to scratch and keys and values straight
    /// into the cache, in one parallel region.
    /// - Parameters:
    ///   - a: activations `[M, K]`.
    ///   - b: stacked weights `[N₀ + N₁ + N₂, K]`.
    ///   - c0: `[M, N₀]`, receives the products with `b`'s first `N₀` rows; `c1`, `c2` the next ones.
    ///   - scratch: conversion blocks for half weights, as for ``matmul(_:transposed:into:alpha:beta:scratch:)``.
    package static func matmul(_ a: Matrix, transposed b: WeightMatrix, into c0: Matrix, _ c1: Matrix, _ c2: Matrix,
                              scratch: HalfScratch? = nil) {
        precondition(a.cols == b.cols && c0.cols + c1.cols + c2.cols == b.rows
            && c0.rows == a.rows && c1.rows == a.rows && c2.rows == a.rows, "matmul shape mismatch")
        projectionBands(a, transposed: b) { worker, cols, following in
            func part(_ c: Matrix, from first: Int) {
                let lower = max(cols.lowerBound, first), upper = min(cols.upperBound, first + c.cols)
                guard lower < upper else { return }
                singleThreadMatmul(a, transposed: b.rows(lower ..< upper), into: c.columns(lower - first ..< upper - first),
                                   alpha: 1, beta: 0, block: scratch?.block(worker),
                                   following: min(upper < cols.upperBound ? cols.upperBound - upper : following, prefetchedRows))
            }
            part(c0, from: 0)
            part(c1, from: c0.cols)
            part(c2, from: c0.cols + c1.cols)
        }
    }

    /// Weight rows after its own that a skinny projection prefetches when the same thread goes on
    /// with them: eight, two packed groups, the next tile of each kernel (more than that, e.g. 16,
    /// left 4 new tokens on f32 weights 1-2% slower in alternating passes on a Zen 5).
    static let prefetchedRows = 8

    /// Multiply-adds below which a projection runs on one thread.
    static let projectionSplitWork = 1 << 16

    /// Splits the output columns of `a · bᵀ` (the rows of `b`) into bands over the workers, so
    /// each weight row is read by one worker, and never the reduction, so every output sees
    /// the same arithmetic however many threads run.
    /// The skinny kernels give every output the same arithmetic however the rows are cut, so their
    /// bands are balanced between the threads (``balancedBands(_:minimumPerBand:alignment:_:)``);
    /// sgemm's are fixed. `body(worker, columns, following)`: see ``balancedBands(_:minimumPerBand:alignment:_:)``.
    private static func projectionBands(_ a: Matrix, transposed b: WeightMatrix, _ body: (Int, Range<Int>, Int) -> Void) {
        let minimumColumns = max(16, projectionSplitWork / max(1, a.rows * a.cols))
        if a.rows <= skinnyRowLimit || takesBlockedSkinny(rows: a.rows, b) {
            balancedBands(b.rows, minimumPerBand: minimumColumns, alignment: 16, body)
        } else {
            parallelBands(b.rows, minimumPerBand: minimumColumns, alignment: 16) { body($0, $1, 0) }
        }
    }

    /// Activation rows up to which projections use ``kv_skinny_gemm`` (each weight row streamed
    /// once) instead of OpenBLAS (`KVSESSION_SKINNY_ROWS` overrides it). 64: on packed weights
    /// (Zen 1, `base`, 1,000 cached tokens) passes of 48 and 64 new tokens took 154-159 and 211 ms
    /// on the skinny kernel against 199-200 and 263 through blocks unpacked for sgemm (196 and 249
    /// on plain rows through sgemm); at 96 the skinny kernel still led once, at 128 they were even.
    package static let skinnyRowLimit = Int(ProcessInfo.processInfo.environment["KVSESSION_SKINNY_ROWS"] ?? "") ?? 64

    /// ``matmul(_:transposed:into:alpha:beta:scratch:)`` on the calling thread only (called inside
    /// ``projectionBands(_:transposed:_:)``, which has created the pool).
    /// - Parameters:
    ///   - block: float32 scratch `[halfBlockRows, ≥ K]` for half weights and many rows.
    ///   - following: rows after `b`'s in the same storage that the caller multiplies next: the
    ///     skinny kernels on packed weights prefetch them while they finish `b`.
    static func singleThreadMatmul(_ a: Matrix, transposed b: WeightMatrix, into c: Matrix, alpha: Float, beta: Float,
                                   block: Matrix?, following: Int = 0) {
        guard a.rows > 0, b.rows > 0 else { return }
        switch (b.storage, b.packed) {
        case let (.f32(w), false):
            if a.rows <= skinnyRowLimit {
                kv_skinny_gemm(a.base, a.rowStride, a.rows, w.base, w.rowStride, w.rows, a.cols, c.base, c.rowStride, alpha, beta)
            } else {
                sgemm(a, transposed: w, into: c, alpha: alpha, beta: beta)
            }
        case let (.f32(w), true):
            // sgemm needs plain rows: many activation rows unpack a block of weight rows at a time.
            guard a.rows > skinnyRowLimit, let block else {
                kv_skinny_gemm_packed_then(a.base, a.rowStride, a.rows, w.base, w.rows, a.cols, c.base, c.rowStride, alpha, beta,
                                           following > 0 ? w.base + w.rows * w.cols : nil, following * w.cols * 4)
                return
            }
            if takesBlockedSkinny(rows: a.rows, b) { blockedSkinny(a, transposed: b, into: c, alpha: alpha, beta: beta, block: block); return }
            blockedSGEMM(a, transposed: b, into: c, alpha: alpha, beta: beta, block: block)
        case let (.f16(w), packed):
            // One to three rows: convert in registers. More: each weight row would be converted once
            // per tile of rows, so convert a chunk of rows once into the block and run the float
            // kernels on it (the skinny kernel gives the same bits either way; sgemm for many rows).
            guard a.rows >= halfConversionRows, let block else {
                if packed {   // finite halfs allow the integer-converting decode tile (same bits)
                    let kernel = b.finiteHalfs ? kv_skinny_gemm_f16_packed_finite_then : kv_skinny_gemm_f16_packed_then
                    kernel(a.base, a.rowStride, a.rows, w.base, w.rows, a.cols, c.base, c.rowStride, alpha, beta,
                           following > 0 ? w.base + w.rows * w.cols : nil, following * w.cols * 2)
                } else {
                    kv_skinny_gemm_f16(a.base, a.rowStride, a.rows, w.base, w.rowStride, w.rows, a.cols, c.base, c.rowStride,
                                       alpha, beta)
                }
                return
            }
            precondition(block.cols >= w.cols, "half conversion block too narrow")
            if a.rows <= skinnyRowLimit {   // chunks that stay in L1 (about 16 KB; whole groups when packed), the next one prefetched meanwhile
                let group = packed ? WeightMatrix.packGroup : 4
                let chunk = min(block.rows, max(group, 4096 / w.cols / group * group))
                kv_skinny_gemm_f16_chunked(a.base, a.rowStride, a.rows, w.base, w.rowStride, w.rows, a.cols, c.base, c.rowStride,
                                           alpha, beta, block.base, block.rowStride, chunk, packed ? 1 : 0,
                                           following > 0 ? w.base + w.rows * w.rowStride : nil, following * w.rowStride * 2)
                return
            }
            if takesBlockedSkinny(rows: a.rows, b) { blockedSkinny(a, transposed: b, into: c, alpha: alpha, beta: beta, block: block); return }
            blockedSGEMM(a, transposed: b, into: c, alpha: alpha, beta: beta, block: block)
        }
    }

    /// Activation rows up to which passes beyond ``skinnyRowLimit`` on packed weights keep to the
    /// skinny tiles, a block of weight rows at a time (`blockedSkinny`), instead of unpacking or
    /// converting blocks for sgemm. On Intel's Emerald Rapids 512, float32 and half: prefills of
    /// `base` in one process alternating the two paths, nine rounds, medians of 96 / 128 / 256 / 384
    /// tokens at 1.45 / 1.33 / 1.08 / 1.12× the tokens/s of the sgemm path (f32), 1.25 / 1.25 / 1.03 /
    /// 1.05× (f16); at 512 even, until the pair tiles finished their outputs in vectors, then 0.88–0.97
    /// of its GEMMs' sgemm against 0.80–0.84 (f32) and 0.84–0.91 against 0.75–0.85 (f16) in three
    /// alternating rounds; at 1,024 and 2,048 even, so sgemm keeps those.
    /// Elsewhere ``skinnyRowLimit`` (never): not measured. `KVSESSION_BLOCKED_SKINNY_ROWS` overrides
    /// it for both precisions. Either way each output gets the skinny kernel's arithmetic.
    package static let blockedSkinnyRows: (f32: Int, f16: Int) = {
        if let rows = ProcessInfo.processInfo.environment["KVSESSION_BLOCKED_SKINNY_ROWS"].flatMap({ Int($0) }) { return (rows, rows) }
        return kv_intel_emerald_rapids() != 0 ? (512, 512) : (skinnyRowLimit, skinnyRowLimit)
    }()

    /// Whether a projection of `rows` activation rows on `b` takes `blockedSkinny`.
    static func takesBlockedSkinny(rows: Int, _ b: WeightMatrix) -> Bool {
        guard b.packed, skinnyRowLimit > 0, rows > skinnyRowLimit else { return false }   // 0: OpenBLAS throughout
        switch b.storage {
        case .f32: return rows <= blockedSkinnyRows.f32
        case .f16: return rows <= blockedSkinnyRows.f16
        }
    }

    /// Bytes of weight rows `blockedSkinny` multiplies at a time: with a chunk of activation rows
    /// (192 KB on 768 columns, 704 KB on 2,816) they stay in a 2 MiB L2.
    static let blockedSkinnyWeightBytes = 1 << 20

    /// Activation rows `blockedSkinny` runs over a block of weights in one skinny call: 64, the
    /// skinny kernel's own default limit (32 and 128 were no better).
    static let blockedSkinnyChunkRows = 64

    /// Many activation rows on packed weights through the skinny kernel: a block of weight rows
    /// (``blockedSkinnyWeightBytes``; halfs converted to float32 into `block` first) at a time,
    /// every chunk of ``blockedSkinnyChunkRows`` activation rows over it, so the weights stream from memory
    /// once and the later chunks find them in L2. Nothing is unpacked or packed, and every output
    /// gets the arithmetic it gets from one skinny call (the float tiles give halfs' bits too).
    static func blockedSkinny(_ a: Matrix, transposed b: WeightMatrix, into c: Matrix, alpha: Float, beta: Float,
                              block: Matrix) {
        let group = WeightMatrix.packGroup
        let room = block.rows * block.cols / b.cols / group * group   // rows of halfs the block converts
        let blockRows = max(group, min(room, blockedSkinnyWeightBytes / (b.cols * 4) / group * group))
        for first in stride(from: 0, to: b.rows, by: blockRows) {
            let rows = min(blockRows, b.rows - first)
            let weights: UnsafePointer<Float>
            switch b.storage {
            case let .f32(w): weights = UnsafePointer(w.base + first * b.cols)
            case let .f16(w):
                precondition(room >= rows && block.rowStride == block.cols, "conversion block too small or not dense")
                kv_halfs_to_floats(block.base, w.base + first * b.cols, rows * b.cols)
                weights = UnsafePointer(block.base)
            }
            for r in stride(from: 0, to: a.rows, by: blockedSkinnyChunkRows) {
                kv_skinny_gemm_packed(a.base + r * a.rowStride, a.rowStride, min(blockedSkinnyChunkRows, a.rows - r), weights, rows,
                                      b.cols, c.base + r * c.rowStride + first, c.rowStride, alpha, beta)
            }
        }
    }

    /// sgemm over `b` a block of rows at a time, each block written to `block` as plain float32
    /// rows first (converted from half, unpacked): sgemm gets whole blocks, which it packs.
    ///
    /// The block's floats are laid out as dense rows of `b`'s width, so a matrix narrower than the
    /// widest one the scratch is sized for gets proportionally more rows a block (on `base`, 936
    /// rows of 768 where the down projection's 2,816 columns get 256): each sgemm call packs all of
    /// `a` again, so fewer calls pack it less often, in the same memory.
    private static func blockedSGEMM(_ a: Matrix, transposed b: WeightMatrix, into c: Matrix, alpha: Float, beta: Float,
                                     block: Matrix) {
        precondition(block.cols >= b.cols && block.rowStride == block.cols, "conversion block too narrow or not dense")
        let group = b.packed ? WeightMatrix.packGroup : 1
        let blockRows = max(group, block.rows * block.cols / b.cols / group * group)
        let dense = Matrix(buffer: block.buffer, offset: block.offset, rows: blockRows, cols: b.cols)
        for first in stride(from: 0, to: b.rows, by: blockRows) {
            let rows = min(blockRows, b.rows - first), plain = dense.rows(0 ..< rows)
            unpack(b, rows: first ..< first + rows, into: plain.base, rowStride: plain.rowStride)
            sgemm(a, transposed: plain, into: c.columns(first ..< first + rows), alpha: alpha, beta: beta)
        }
    }

    /// Activation rows from which projections over half weights convert chunks of weight rows to
    /// float32 once instead of converting in registers for every tile of rows: 8, measured on the
    /// Zen 1 family (F16C on 128-bit units, a conversion dearer than streaming its weight); 32 on
    /// AMD Zen 4 with the AVX-512 bodies, where a 512-bit conversion serves up to twelve rows and
    /// passes of 8 / 16 new tokens on `base` went from 1.52–1.60 / 1.32–1.38 to 1.30–1.37 /
    /// 1.24–1.28 of their roofline (32 rows even, 64 a little better chunked). On Intel's Emerald
    /// Rapids with the AVX-512 bodies, never: converting in registers was faster at every count up
    /// to 64 (8 / 16 / 32 / 64 new tokens at 1.72–1.78 / 1.52–1.59 / 1.43–1.47 / 1.41–1.46 of their
    /// roofline in pairs, against 2.32–2.37 / 2.11–2.26 / 1.96–1.97 / 1.73–1.80 chunked from 8 rows).
    /// Never above the skinny range's end, so passes beyond it still reach sgemm;
    /// `KVSESSION_HALF_CONVERT_ROWS` overrides it. Either way, the same bits.
    package static let halfConversionRows = Int(ProcessInfo.processInfo.environment["KVSESSION_HALF_CONVERT_ROWS"] ?? "")
        ?? min(kv_uses_skinny_avx512() == 0 ? 8 : kv_intel_emerald_rapids() != 0 ? skinnyRowLimit + 1
               : kv_amd_zen_generation() == 4 ? 32 : 8, skinnyRowLimit + 1)

    /// OpenBLAS's `c = alpha * a · bᵀ + beta * c` (sgemv for one row).
    static func sgemm(_ a: Matrix, transposed b: Matrix, into c: Matrix, alpha: Float, beta: Float) {
        if a.rows == 1 {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, Int32(b.rows), Int32(b.cols), alpha,
                        b.base, Int32(b.rowStride), a.base, 1, beta, c.base, 1)
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(a.rows), Int32(b.rows), Int32(a.cols),
                        alpha, a.base, Int32(a.rowStride), b.base, Int32(b.rowStride),
                        beta, c.base, Int32(c.rowStride))
        }
    }

    /// `c = a · b + beta · c`: mixes value rows by attention weights.
    /// - Parameters:
    ///   - a: weights `[M, K]`.
    ///   - b: values `[K, N]`.
    ///   - c: output `[M, N]`, overwritten when `beta` is 0, accumulated into when it is 1.
    package static func matmul(_ a: Matrix, _ b: Matrix, into c: Matrix, beta: Float = 0) {
        precondition(a.cols == b.rows && c.rows == a.rows && c.cols == b.cols, "matmul shape mismatch")
        _ = pool   // creating the pool holds OpenBLAS to one thread before its first call
        guard a.rows > 0, b.cols > 0 else { return }
        if a.rows == 1 {
            cblas_sgemv(CblasRowMajor, CblasTrans, Int32(b.rows), Int32(b.cols), 1,
                        b.base, Int32(b.rowStride), a.base, 1, beta, c.base, 1)
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(a.rows), Int32(b.cols), Int32(a.cols),
                        1, a.base, Int32(a.rowStride), b.base, Int32(b.rowStride), beta, c.base, Int32(c.rowStride))
        }
    }

    /// The kernel set OpenBLAS runs on this CPU (its "core type", e.g. `Haswell`, `Zen`,
    /// `SkylakeX`): its own choice, the one forced by `OPENBLAS_CORETYPE`, or the runtime's where
    /// OpenBLAS fell back to generic kernels (``blasCoreTypeReplaced``). Benchmarks print it:
    /// results and speed depend on it.
    package static var blasCoreType: String { String(cString: openblas_get_corename()) }

    /// The kernel set OpenBLAS chose on its own and the runtime replaced as the process loaded
    /// (`kv_blas_replaced_core`: `Prescott`, OpenBLAS's generic SSE3 kernels, on a CPU with AVX2
    /// or AVX-512 that its release does not know; on Intel's Emerald Rapids, Debian 12's OpenBLAS
    /// ran those, sgemm at a fifth of the Cooperlake kernels' speed on the same CPU), or `nil` when
    /// OpenBLAS's own choice (or `OPENBLAS_CORETYPE`'s) stands.
    package static var blasCoreTypeReplaced: String? { kv_blas_replaced_core().map { String(cString: $0) } }

    /// Runs `body` with OpenBLAS on `count` threads of its own, then returns it to one thread.
    ///
    /// For benchmarks that compare the runtime against OpenBLAS's own threading (the
    /// ceilings of `kvbench kernels`). The runtime otherwise keeps OpenBLAS single-threaded
    /// and splits work over its own workers, so no other thread may run kernels meanwhile.
    /// OpenBLAS's threads keep spinning for a while after the last call; let them settle
    /// before timing anything else.
    package static func withOpenBLASThreads<T>(_ count: Int, _ body: () throws -> T) rethrows -> T {
        _ = pool   // the pool's creation sets one thread; make sure it happened first
        openblas_set_num_threads(Int32(max(1, count)))
        defer { openblas_set_num_threads(1) }
        return try body()
    }
}
