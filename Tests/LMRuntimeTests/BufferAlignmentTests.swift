@testable import LMRuntime
import Testing

/// Storage the kernels read starts on a cache line, whatever its size: rows whose stride is a
/// multiple of 16 floats then start on one too, and no 32- or 64-byte load straddles two lines.
struct BufferAlignmentTests {
    /// Sizes from a few floats through the heap's large-chunk range (where `malloc` returns 16
    /// bytes past a page) to above the threshold for mappings of their own.
    static let counts = [1, 7, 100, 4_096, 786_432, LargeMapping.threshold / 4 + 1]

    @Test(arguments: counts)
    func floatBuffer_startsOnACacheLine(count: Int) throws {
        for _ in 0 ..< 4 {   // several live at once, so they cannot all land on one lucky address
            let buffers = try (0 ..< 3).map { _ in try FloatBuffer(checkedCount: count) }
            for buffer in buffers {
                #expect(Int(bitPattern: buffer.base) % LargeMapping.heapAlignment == 0, "\(count) floats at \(buffer.base)")
                #expect(buffer.base[count - 1] == 0)
            }
        }
    }

    @Test(arguments: counts)
    func halfBuffer_startsOnACacheLineAndIsZeroed(count: Int) throws {
        let buffers = try (0 ..< 3).map { _ in try HalfBuffer(checkedCount: count) }
        for buffer in buffers {
            #expect(Int(bitPattern: buffer.base) % LargeMapping.heapAlignment == 0, "\(count) halfs at \(buffer.base)")
            #expect((0 ..< count).allSatisfy { buffer[$0] == 0 })
        }
    }
}
