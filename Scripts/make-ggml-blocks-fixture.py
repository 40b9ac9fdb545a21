#!/usr/bin/env python3
"""Writes Tests/Fixtures/ggml-blocks.gguf: for each GGML block encoding the runtime reads, a tensor
of pseudo-random blocks (`<type>`, 2 rows of 512 weights) and, beside it, the float32 values that
gguf-py's numpy dequantizer gives for those bytes (`<type>.expected`). The tests decode the first
with the package's decoder and compare bits with the second, so the package is checked against an
implementation it shares no code with.

Needs numpy and gguf (pip install gguf); run from the repository root. The blocks are random bytes
with their half-precision scales and minimums replaced by finite halfs of assorted sizes (zero,
subnormal, normal, the largest), so every bit of every quant field is exercised; one block of each
type also gets an infinite scale, whose weights are infinite or NaN as the arithmetic makes them."""
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

ROWS, COLS = 2, 512
# Byte offsets of each block's half-precision fields (scale d, and the minimum or dmin).
HALF_FIELDS = {
    T.F16: None, T.BF16: None,
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}

rng = np.random.default_rng(20261129)
writer = gguf.GGUFWriter("Tests/Fixtures/ggml-blocks.gguf", arch="blocks")
for qtype, fields in HALF_FIELDS.items():
    block_size, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = ROWS * COLS // block_size
    raw = rng.integers(0, 256, size=(blocks, block_bytes), dtype=np.uint8)
    if qtype == T.F16:   # finite halfs only: the loader's half conversion is tested elsewhere for the rest
        raw = rng.uniform(-4, 4, size=ROWS * COLS).astype(np.float16).view(np.uint8).reshape(blocks, block_bytes)
    elif qtype == T.BF16:   # every bit pattern but NaNs (whose payloads numpy need not keep)
        bits = raw.view(np.uint16)
        bits[(bits & 0x7FFF) > 0x7F80] &= 0x807F
    else:
        sizes = np.concatenate([[0.0, 2.0 ** -20, 65504.0], rng.uniform(-3, 3, blocks * len(fields) - 3)])
        halfs = sizes.astype(np.float16).view(np.uint8).reshape(blocks, len(fields), 2)
        for i, at in enumerate(fields):
            raw[:, at:at + 2] = halfs[:, i, :]
        raw[blocks - 1, fields[0]:fields[0] + 2] = np.array([np.inf], dtype=np.float16).view(np.uint8)
    bytes_per_row = COLS // block_size * block_bytes
    raw = raw.reshape(ROWS, bytes_per_row)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = dequantize(raw, qtype).astype(np.float32).reshape(ROWS, COLS)
    name = qtype.name.lower()
    writer.add_tensor(name, raw, raw_dtype=qtype)
    writer.add_tensor(name + ".expected", expected)
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
