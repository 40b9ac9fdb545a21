#!/usr/bin/env python3
"""Writes Tests/Fixtures/byte-level-bpe/qwen2-tool-tags.gguf: the qwen2 fixture vocabulary with
`</tool_call>`, `<tool_response>` and `</tool_response>` appended as user-defined tokens (type 4),
as Qwen2.5's converted files hold them beside `<tool_call>`. Needs gguf-py (`pip install gguf`).
Run from the repository root."""
import gguf

SOURCE = "Tests/Fixtures/byte-level-bpe/qwen2.gguf"
OUT = "Tests/Fixtures/byte-level-bpe/qwen2-tool-tags.gguf"
ADDED = ["</tool_call>", "<tool_response>", "</tool_response>"]

fields = gguf.GGUFReader(SOURCE).fields
value = lambda key: fields[key].contents()
writer = gguf.GGUFWriter(OUT, arch=value("general.architecture"))
writer.add_tokenizer_model(value("tokenizer.ggml.model"))
writer.add_tokenizer_pre(value("tokenizer.ggml.pre"))
writer.add_token_list(value("tokenizer.ggml.tokens") + ADDED)
writer.add_token_merges(value("tokenizer.ggml.merges"))
writer.add_token_types(value("tokenizer.ggml.token_type") + [4] * len(ADDED))
writer.add_bos_token_id(value("tokenizer.ggml.bos_token_id"))
writer.add_eos_token_id(value("tokenizer.ggml.eos_token_id"))
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
