#!/usr/bin/env python3
"""Writes Tests/Fixtures/sentencepiece/mistral-v3-layout.gguf: the bundled vocabulary
(Models/tokenizer.bin) laid out as Mistral's v3 vocabularies are, a vocabulary-only GGUF file.

Mistral 7B Instruct v0.3 keeps `<unk>`, `<s>`, `</s>` at 0-2 like Llama 2, then 768 control tokens
(`[INST]`, `[/INST]`, `[TOOL_CALLS]`, `[AVAILABLE_TOOLS]`, `[/AVAILABLE_TOOLS]`, `[TOOL_RESULTS]`,
`[/TOOL_RESULTS]`, then `[control_8]` ...), and only then the byte pieces `<0x00>`...`<0xFF>`.
This fixture keeps the first seven by name and eight `[control_N]` after them (15 in all), then
the bundled pieces from `<0x00>` on, its own chat pieces (`<|system|>` ...) renamed to further
`[control_N]` tokens, since a Mistral vocabulary has none of them. Token types: 2 for `<unk>`, 3
(control) for BOS, EOS and every bracketed token, 6 for bytes, 1 otherwise. The chat template is a
short one written for this fixture in the form of Mistral's.

Needs gguf-py (`pip install gguf`). Run from the repository root."""
import struct
import gguf

data = open("Models/tokenizer.bin", "rb").read()
offset, pieces, scores = 4, [], []
while offset < len(data):
    score, length = struct.unpack_from("<fi", data, offset)
    offset += 8
    pieces.append(data[offset:offset + length])
    scores.append(score)
    offset += length

named = ["[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"]
control = named + ["[control_%d]" % n for n in range(8, 16)]
chat = {b"<|system|>", b"<|user|>", b"<|assistant|>", b"<|tool|>", b"<|tool_call|>", b"<|end|>"}

tokens, token_scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
tokens += control
token_scores += [0.0] * len(control)
types += [3] * len(control)
next_control = 16
for piece, score in zip(pieces[3:], scores[3:]):
    if piece in chat:
        tokens.append("[control_%d]" % next_control)
        next_control += 1
        token_scores.append(0.0)
        types.append(3)
        continue
    text = piece.decode("utf-8")
    is_byte = len(piece) == 6 and text.startswith("<0x") and text.endswith(">")
    tokens.append(text.replace(" ", "\u2581"))
    token_scores.append(score)
    types.append(6 if is_byte else 1)

template = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
            "{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif message['role'] == 'assistant' %}"
            "{{ ' ' + message['content'] + eos_token }}{% endif %}{% endfor %}")

writer = gguf.GGUFWriter("Tests/Fixtures/sentencepiece/mistral-v3-layout.gguf", arch="llama")
writer.add_tokenizer_model("llama")
writer.add_token_list(tokens)
writer.add_token_scores(token_scores)
writer.add_token_types(types)
writer.add_unk_token_id(0)
writer.add_bos_token_id(1)
writer.add_eos_token_id(2)
writer.add_add_bos_token(True)
writer.add_chat_template(template)
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
