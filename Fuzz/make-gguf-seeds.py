#!/usr/bin/env python3
"""Writes the GGUF seed inputs in Fuzz/corpus/gguf: four tiny llama models (F32, F16, Q8_0, Q4_1) with a
260-token vocabulary, one (F32) with a byte-level `llama-bpe` vocabulary of 262 tokens and Llama 3.1's
RoPE frequency factors, and one `qwen2` model (F32: Q, K and V biases, Q and K rows in the half-split
order, a byte-level `qwen2` vocabulary), small enough for libFuzzer to mutate. Run from the repository root."""
import struct

def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b

def kv_u32(key, v): return s(key) + struct.pack("<II", 4, v)
def kv_f32(key, v): return s(key) + struct.pack("<If", 6, v)
def kv_str(key, v): return s(key) + struct.pack("<I", 8) + s(v)
def kv_strs(key, vs): return s(key) + struct.pack("<IIQ", 9, 8, len(vs)) + b"".join(s(v) for v in vs)
def kv_i32s(key, vs): return s(key) + struct.pack("<IIQ", 9, 5, len(vs)) + b"".join(struct.pack("<i", v) for v in vs)
def kv_bool(key, v): return s(key) + struct.pack("<IB", 7, v)
def kv_f32s(key, vs): return s(key) + struct.pack("<IIQ", 9, 6, len(vs)) + b"".join(struct.pack("<f", v) for v in vs)

def encode(values, kind, cols):
    if kind == 0: return b"".join(struct.pack("<f", v) for v in values)
    if kind == 1: return b"".join(struct.pack("<e", v) for v in values)
    if kind == 3:   # Q4_1: per 32 values a half scale and minimum, then 32 nibbles (low ones first)
        out = b""
        for i in range(0, len(values), 32):
            block = values[i:i + 32]
            low, d = min(block), (max(block) - min(block)) / 15
            q = [0 if d == 0 else min(15, round((v - low) / d)) for v in block]
            out += struct.pack("<ee", d, low) + bytes(q[j] | q[j + 16] << 4 for j in range(16))
        return out
    out = b""   # Q8_0: per 32 values a half scale and 32 int8
    for i in range(0, len(values), 32):
        block = values[i:i + 32]
        d = max(abs(v) for v in block) / 127
        inv = 0 if d == 0 else 1 / d
        out += struct.pack("<e", d) + bytes((round(v * inv)) & 0xFF for v in block)
    return out

def byte_alphabet():
    """GPT-2's printable character for each byte."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, extra = {}, 256
    for b in range(256):
        if b in keep: out[b] = chr(b)
        else: out[b], extra = chr(extra), extra + 1
    return [out[b] for b in range(256)]

def model(kind, dim, hidden, byte_level=False, arch="llama"):
    qwen2 = arch == "qwen2"
    meta = [kv_str("general.architecture", arch), kv_u32(arch + ".embedding_length", dim),
            kv_u32(arch + ".feed_forward_length", hidden), kv_u32(arch + ".block_count", 1),
            kv_u32(arch + ".attention.head_count", 2), kv_u32(arch + ".attention.head_count_kv", 1),
            kv_u32(arch + ".context_length", 16), kv_f32(arch + ".rope.freq_base", 1000000.0 if qwen2 else 10000.0)]
    if byte_level:
        tokens = byte_alphabet() + ["\u0120t", "\u0120th", "he", "\u0120the", "<|endoftext|>"]
        meta += [kv_str("tokenizer.ggml.model", "gpt2"), kv_str("tokenizer.ggml.pre", "qwen2" if qwen2 else "llama-bpe"),
                 kv_strs("tokenizer.ggml.tokens", tokens), kv_strs("tokenizer.ggml.merges", ["\u0120 t", "\u0120t h", "h e", "\u0120th e"]),
                 kv_i32s("tokenizer.ggml.token_type", [1] * (len(tokens) - 1) + [3]),
                 kv_u32("tokenizer.ggml.bos_token_id", len(tokens) - 1), kv_u32("tokenizer.ggml.eos_token_id", len(tokens) - 1),
                 kv_bool("tokenizer.ggml.add_bos_token", 0 if qwen2 else 1)]
    else:
        tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581a"]
        meta += [kv_str("tokenizer.ggml.model", "llama"), kv_strs("tokenizer.ggml.tokens", tokens),
                 kv_f32s("tokenizer.ggml.scores", [0.0] * len(tokens))]
    kv = dim // 2
    shapes = [("token_embd.weight", [dim, len(tokens)]), ("blk.0.attn_norm.weight", [dim]),
              ("blk.0.attn_q.weight", [dim, dim]), ("blk.0.attn_k.weight", [dim, kv]), ("blk.0.attn_v.weight", [dim, kv]),
              ("blk.0.attn_output.weight", [dim, dim]), ("blk.0.ffn_norm.weight", [dim]),
              ("blk.0.ffn_gate.weight", [dim, hidden]), ("blk.0.ffn_up.weight", [dim, hidden]),
              ("blk.0.ffn_down.weight", [hidden, dim]), ("output_norm.weight", [dim])]
    if qwen2: shapes += [("blk.0.attn_q.bias", [dim]), ("blk.0.attn_k.bias", [kv]), ("blk.0.attn_v.bias", [kv])]
    elif byte_level: shapes.append(("rope_freqs.weight", [dim // 4]))   # head size dim / 2: dim / 4 pairs
    infos, blobs, offset = b"", [], 0
    for n, (name, dims) in enumerate(shapes):
        count = 1
        for d in dims: count *= d
        t = 0 if len(dims) == 1 else kind
        values = [1.0 + i for i in range(count)] if name == "rope_freqs.weight" else [((n * 7 + i * 13) % 29 - 14) / 50 for i in range(count)]
        blob = encode(values, t, dims[0])
        infos += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", t, offset)
        blobs.append(blob)
        offset += (len(blob) + 31) // 32 * 32
    out = b"GGUF" + struct.pack("<IQQ", 3, len(shapes), len(meta)) + b"".join(meta) + infos
    for blob in blobs:
        out += b"\0" * ((32 - len(out) % 32) % 32) + blob
    return out

for name, kind, dim, hidden in [("f32", 0, 8, 8), ("f16", 1, 8, 12), ("q8_0", 8, 32, 32), ("q4_1", 3, 32, 32)]:
    open("Fuzz/corpus/gguf/%s.gguf" % name, "wb").write(model(kind, dim, hidden))
open("Fuzz/corpus/gguf/byte-level.gguf", "wb").write(model(0, 8, 8, byte_level=True))
open("Fuzz/corpus/gguf/qwen2.gguf", "wb").write(model(0, 8, 8, byte_level=True, arch="qwen2"))
