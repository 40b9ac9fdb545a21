import Foundation

extension GGUFTensorType {
    /// Decodes `matrix.rows × matrix.cols` elements stored in this encoding at `byteOffset` of
    /// `data` into `matrix`, row by row (GGML dimensions `[cols, rows]`; a row is whole blocks).
    /// The range was checked when the file was read (``GGUFFile``).
    package func decode(from data: Data, byteOffset: Int, into matrix: Matrix) {
        switch self {
        case .f32: Kernels.loadLittleEndianFloats(from: data, byteOffset: byteOffset, into: matrix)
        case .f16: Kernels.loadHalfs(from: data, byteOffset: byteOffset, into: matrix)
        case .q8_0: Kernels.loadQ8_0(from: data, byteOffset: byteOffset, into: matrix)
        default: Kernels.loadBlocks(self, from: data, byteOffset: byteOffset, into: matrix)
        }
    }
}
