#!/usr/bin/env python3
"""Writes Tests/Fixtures/byte-level-bpe/: one small byte-level BPE vocabulary (GPT-2 style, as
llama.cpp's converter stores Llama 3, SmolLM and Qwen2 vocabularies: tokenizer.ggml.model "gpt2")
in four GGUF files that differ only in tokenizer.ggml.pre (gpt-2, smollm, llama-bpe, qwen2), and
expected.json: a list of test texts and, for each pre-tokenizer, the ids Hugging Face's
`tokenizers` library (Rust; PyPI `tokenizers`) gives each text with that model's pre-tokenizer.
The package's tokenizer is checked against an implementation it shares no code with.

Needs `pip install tokenizers gguf numpy`; run from the repository root. The vocabulary is trained
here on the repository's own README and design notes plus a few lines in other scripts, so the
fixture is small (1,204 tokens) but has real merges, multi-byte pieces and a few control tokens."""
import json, pathlib, random
import gguf
from tokenizers import AddedToken, Tokenizer, Regex, models, pre_tokenizers, trainers, decoders

OUT = pathlib.Path("Tests/Fixtures/byte-level-bpe")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# The pre-tokenizers of the four llama.cpp pre types, as the models' tokenizer.json files define them.
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
byte_level = lambda regex: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=regex)
PRE = {
    "gpt-2": (pre_tokenizers.Sequence([byte_level(True)]), False),
    "smollm": (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level(True)]), False),
    "llama-bpe": (pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), "isolated"), byte_level(False)]), True),
    "qwen2": (pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), "isolated"), byte_level(False)]), False),
}

corpus = [pathlib.Path(p).read_text() for p in ["README.md", "../shared/DESIGN.md", "Benchmarks/PERFORMANCE.md"]]
corpus += ["Ünïcödé façade naïve café — «quotes» ‘single’ “double”.", "中文文本，日本語のテキスト、한국어 텍스트.",
           "Ελληνικά κείμενα και русский текст. عربى ٣٤٥", "emoji 😀👍🏽🎉 and tabs\tand\r\nCRLF lines",
           "I'm sure they'll say it's what we'd've DONE'S 'RE 'Ll 12345 1,000,000.50 ½ Ⅻ"] * 20
trainer_tokenizer = Tokenizer(models.BPE())
trainer_tokenizer.pre_tokenizer = PRE["gpt-2"][0]
trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False)
trainer_tokenizer.train_from_iterator(corpus, trainer)
model = json.loads(trainer_tokenizer.to_str())["model"]
vocab = model["vocab"]
merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
# Whole words no merge reaches, as in vocabularies converted from tiktoken (Llama 3's): only a
# pre-tokenizer that takes whole words (llama-bpe) encodes them as one token.
for word in ["Ġunmergeable", "Ġzebra", "Ġquuxly"]:
    assert word not in vocab
    vocab[word] = len(vocab)
tokens = sorted(vocab, key=vocab.get)
# An added token that is not special (GGUF type 4, user-defined): both libraries read it in text.
USER = "<tool_call>"
tokens.append(USER)
assert [vocab[t] for t in tokens[:-1]] == list(range(len(tokens) - 1))

# Test texts: edge cases by hand, then random strings from a pool of awkward pieces.
texts = ["", " ", "  ", "\n", "\r\n", "\t", "a", "Hello world", "Hello  world", " leading space", "trailing space ",
         "two  spaces and three   and tab\tword", "line\nbreak\n\nparagraph\r\nCRLF\n \n", "  \n  indented\n\tcode()",
         "I'm can't won't they'll we'd you've she's", "I'M CAN'T THEY'LL WE'D YOU'VE SHE'S 'Re 'vE", "'s's'ss''s",
         "1 12 123 1234 12345 1234567", "3.14159, -2e10, $1,000.00 50%", "x=1+2*3; y<=4 && z>5 || w!=6",
         "def f(x):\n    return x**2  # comment\n", "naïve café Ünïcödé façade", "中文文本，日本語のテキスト", "한국어 텍스트",
         "Ελληνικά и русский", "عربى ٣٤٥ ١٢", "emoji 😀👍🏽🎉!", "½ ⅓ Ⅻ ², ³", "e\u0301 combining", "\u00a0nbsp\u3000ideographic",
         "<|endoftext|> is text here", "an unmergeable zebra, quuxly", " zebra zebras unmergeable",
         "call <tool_call>{\"a\": 1}<tool_call> <tool_call>x", "<tool_call>", "a<tool_call ><tool_call>>", "((nested)) [brackets] {braces} <angles>", "...!!!???", "a'b 'c' \"d\"",
         "ǅemal ʰ modifier", "\n\n\n", "   \t  \n  x", "word\n", " \n", "end  "]
pool = ["a", "b", "Z", "the", "é", "ß", "Ω", "中", "文", "😀", "👍🏽", "0", "7", "42", "٣", "Ⅻ", "½", " ", "  ", "\t", "\n",
        "\r", "\r\n", "\u00a0", "\u3000", "'", "'s", "'LL", "'re", "'d", "!", "?", ".", ",", "(", ")", "-", "_", "$", "+",
        "<", ">", "\u0301", "ǅ", "ʰ", "Hello", "world", "cache", "KV"]
rng = random.Random(20261129)
texts += ["".join(rng.choice(pool) for _ in range(rng.randint(1, 24))) for _ in range(400)]
texts.append(corpus[0][:1500])

expected = {"texts": texts, "ids": {}}
for pre, (pre_tokenizer, ignore_merges) in PRE.items():
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges], ignore_merges=ignore_merges))
    tok.add_tokens([AddedToken(USER, special=False, normalized=False)])
    assert tok.token_to_id(USER) == len(tokens) - 1
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    for t, i in zip(texts, ids):
        assert tok.decode(i, skip_special_tokens=False) == t, (pre, t)
    expected["ids"][pre] = ids

    writer = gguf.GGUFWriter(str(OUT / f"{pre}.gguf"), arch="llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.add_token_types([gguf.TokenType.CONTROL if t in SPECIAL else gguf.TokenType.USER_DEFINED if t == USER
                            else gguf.TokenType.NORMAL for t in tokens])
    writer.add_bos_token_id(vocab["<|endoftext|>"])
    writer.add_eos_token_id(vocab["<|im_end|>"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
(OUT / "expected.json").write_text(json.dumps(expected, ensure_ascii=False, separators=(",", ":")) + "\n")
print(f"{len(tokens)} tokens, {len(merges)} merges, {len(texts)} texts")
