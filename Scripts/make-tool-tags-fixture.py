#!/usr/bin/env python3
"""Writes two vocabularies with tool-call tokens beside the qwen2 fixture, from it:

- Tests/Fixtures/byte-level-bpe/qwen2-tool-tags.gguf: `</tool_call>`, `<tool_response>` and
  `</tool_response>` appended as user-defined tokens (type 4), as Qwen2.5's converted files hold
  them beside `<tool_call>`;
- Tests/Fixtures/byte-level-bpe/llama3-tool-tags.gguf: a Llama 3 vocabulary (the ChatML tokens renamed
  `<|start_header_id|>`, `<|eot_id|>`, `<|begin_of_text|>`; `<|end_header_id|>`, `<|python_tag|>`
  and `<|eom_id|>` appended as control tokens; the `llama-bpe` pre-tokenizer; BOS added), as
  Llama 3.1's files have them.

Needs gguf-py (`pip install gguf`). Run from the repository root."""
import gguf

DIR = "Tests/Fixtures/byte-level-bpe/"
fields = gguf.GGUFReader(DIR + "qwen2.gguf").fields
value = lambda key: fields[key].contents()

def write(name, pre, tokens, types, add_bos=None):
    writer = gguf.GGUFWriter(DIR + name, arch=value("general.architecture"))
    writer.add_tokenizer_model(value("tokenizer.ggml.model"))
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_merges(value("tokenizer.ggml.merges"))
    writer.add_token_types(types)
    writer.add_bos_token_id(value("tokenizer.ggml.bos_token_id"))
    writer.add_eos_token_id(value("tokenizer.ggml.eos_token_id"))
    if add_bos is not None: writer.add_add_bos_token(add_bos)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

tokens, types = value("tokenizer.ggml.tokens"), value("tokenizer.ggml.token_type")
tags = ["</tool_call>", "<tool_response>", "</tool_response>"]
write("qwen2-tool-tags.gguf", value("tokenizer.ggml.pre"), tokens + tags, types + [4] * len(tags))
renamed = {"<|im_start|>": "<|start_header_id|>", "<|im_end|>": "<|eot_id|>", "<|endoftext|>": "<|begin_of_text|>"}
control = ["<|end_header_id|>", "<|python_tag|>", "<|eom_id|>"]
write("llama3-tool-tags.gguf", "llama-bpe", [renamed.get(t, t) for t in tokens] + control, types + [3] * len(control), add_bos=True)
