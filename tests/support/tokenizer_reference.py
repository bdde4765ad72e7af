#!/usr/bin/env python3
"""The reference for mixt's tokenizers: trains three small tokenizers the way their families
are built, then writes what Hugging Face `tokenizers` and `sentencepiece` (the Python
packages, the references) make of a varied text.

    tokenizer_reference.py OUT_DIR [--text FILE ...] [--wide]

OUT_DIR gets:
  gpt2_style/tokenizer.json    byte-level BPE, GPT-2's pre-tokenizer (ByteLevel with its regex)
  llama3_style/tokenizer.json  byte-level BPE, Llama 3's Split regex, ignore_merges, special
                               tokens and a post-processor that adds <|begin_of_text|>
  qwen2_style/tokenizer.json   byte-level BPE behind an NFC normalizer, Qwen 2's regex
  llama2_style/tokenizer.json  Llama 2 as transformers converts it (legacy): Prepend and Replace
                               normalizers, BPE with byte fallback, Replace/ByteFallback/Fuse/Strip
  metaspace_style/tokenizer.json  the same model behind a Metaspace pre-tokenizer and decoder
  sentencepiece/tokenizer.model  a SentencePiece BPE model with byte fallback (older Llamas)
  cases.json                   {tokenizer: [{text, ids, ids_with_special, decoded, decoded_skipping}]}
  partial.json                 {tokenizer: {ids, decoded}}: text with byte tokens between that leave
                               characters unfinished (as a sampling model may draw them), and its decode
  llama3_wide/tokenizer.json   (--wide) llama3_style with 70,000 more added tokens, <extra_0>..: ids past
                               uint16, for `mixt tokenize`'s uint32 shards

Nothing is downloaded: the tokenizers are trained here, on the texts given (default: the
GPL-3 text every Debian has, and tests/fixtures/text/tokenizer_corpus.txt).
"""
import argparse
import json
import os
import sys

import sentencepiece as spm
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "fixtures", "text", "tokenizer_corpus.txt")
GPL3 = "/usr/share/common-licenses/GPL-3"

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def gpt2_style(files):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train(files, trainer)
    return tok


def llama3_style(files):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>"]
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train(files, trainer)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    # An added token that is not special: matched before BPE, kept by decode(skip_special_tokens).
    tok.add_tokens([AddedToken("<tool>", special=False, normalized=False)])
    return tok


QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen2_style(files):
    """Qwen 2's shape: NFC first, then Llama-3-like splitting with single digits."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train(files, trainer)
    return tok


def with_byte_tokens(tok):
    """The tokenizer with <0x00>..<0xFF> added to its vocabulary (as SentencePiece-converted
    tokenizers have them), for byte_fallback."""
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", max(vocab.values()) + 1 + len(spec["added_tokens"]))
    return Tokenizer.from_str(json.dumps(spec))


def llama2_style(files):
    """The tokenizer.json form of Llama 2 (transformers' legacy conversion): no pre-tokenizer,
    a normalizer that prepends and replaces spaces with U+2581, byte fallback, and the decoder
    that undoes it."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120,
                                  show_progress=False)
    tok.train(files, trainer)
    tok = with_byte_tokens(tok)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def metaspace_style(files):
    """The newer form (transformers' non-legacy conversion): a Metaspace pre-tokenizer that
    prepends U+2581 to the first piece only, and the Metaspace decoder."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True)
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="\u2581", prepend_scheme="first", split=True),
                                     decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120,
                                  show_progress=False)
    tok.train(files, trainer)
    return with_byte_tokens(tok)


def sentencepiece_model(files, out_dir):
    prefix = os.path.join(out_dir, "tokenizer")
    spm.SentencePieceTrainer.train(input=",".join(files), model_prefix=prefix, vocab_size=600, model_type="bpe",
                                   byte_fallback=True, character_coverage=0.99, num_threads=1,
                                   minloglevel=2, user_defined_symbols=["<tool>"])
    os.remove(prefix + ".vocab")
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def texts(files):
    """What each tokenizer encodes: every line of every text, each text whole, and the edges."""
    out = ["", " ", "  ", "\n", "\n\n\n", " \n ", "a", " a", "hello world", "  leading", "trailing  ",
           "<|endoftext|>", "<|endoftext|><|endoftext|>", "x<|begin_of_text|>y", "<tool> call <tool>",
           "<|endoftext", "I'VE", "don't", "12345678901", "\t\ttabs", "🤖", "é", "e\u0301"]
    for path in files:
        with open(path, encoding="utf-8") as f:
            whole = f.read()
        out.append(whole)
        out.extend(line for line in whole.splitlines(keepends=True) if line)
    return out


def byte_chars():
    """GPT-2's byte -> printable character map (the byte-level tokens' spelling)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


BYTE_CHARS = byte_chars()


def partial_ids(encode, byte_id):
    """Text, then bytes that start a character and are not followed by its rest, between text."""
    pieces = ["Hello wörld", b"\xcf", "a", b"\xe2\x82", " b", b"\xf0\x9f\x98", b"\xcf\x80", b"\x80", "z €", b"\xe2"]
    ids = []
    for piece in pieces:
        if isinstance(piece, str):
            ids += encode(piece)
        else:
            for b in piece:
                token = byte_id(b)
                assert token is not None and token >= 0, b
                ids.append(token)
    return ids


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--text", action="append", help="a training and test text (default GPL-3 and the corpus)")
    parser.add_argument("--wide", action="store_true", help="also llama3_wide (a vocabulary past 65,536)")
    args = parser.parse_args()
    files = args.text or [GPL3, CORPUS]
    if args.wide:
        tok = llama3_style(files)
        tok.add_tokens([AddedToken(f"<extra_{i}>", special=False, normalized=False) for i in range(70000)])
        os.makedirs(os.path.join(args.out_dir, "llama3_wide"), exist_ok=True)
        tok.save(os.path.join(args.out_dir, "llama3_wide", "tokenizer.json"))
    families = (("gpt2_style", gpt2_style), ("llama3_style", llama3_style), ("qwen2_style", qwen2_style),
                ("llama2_style", llama2_style), ("metaspace_style", metaspace_style))
    for sub in [name for name, _ in families] + ["sentencepiece"]:
        os.makedirs(os.path.join(args.out_dir, sub), exist_ok=True)

    cases = {}
    for name, build in families:
        tok = build(files)
        tok.save(os.path.join(args.out_dir, name, "tokenizer.json"))
        tok = Tokenizer.from_file(os.path.join(args.out_dir, name, "tokenizer.json"))  # as mixt reads it
        rows = []
        for text in texts(files):
            ids = tok.encode(text, add_special_tokens=False).ids
            rows.append({"text": text, "ids": ids,
                         "ids_with_special": tok.encode(text, add_special_tokens=True).ids,
                         "decoded": tok.decode(ids, skip_special_tokens=False),
                         "decoded_skipping": tok.decode(ids, skip_special_tokens=True)})
        cases[name] = rows

    sp = sentencepiece_model(files, os.path.join(args.out_dir, "sentencepiece"))
    rows = []
    for text in texts(files):
        ids = sp.encode(text)
        rows.append({"text": text, "ids": ids, "ids_with_special": [sp.bos_id()] + ids,
                     "decoded": sp.decode(ids), "decoded_skipping": sp.decode(ids)})
    cases["sentencepiece"] = rows

    with open(os.path.join(args.out_dir, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)

    partial = {}
    for name, _ in families:
        tok = Tokenizer.from_file(os.path.join(args.out_dir, name, "tokenizer.json"))
        ids = partial_ids(lambda text: tok.encode(text, add_special_tokens=False).ids,
                          lambda b: tok.token_to_id(BYTE_CHARS[b]) if tok.token_to_id(BYTE_CHARS[b]) is not None
                          else tok.token_to_id(f"<0x{b:02X}>"))
        partial[name] = {"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}
    ids = partial_ids(sp.encode, lambda b: sp.piece_to_id(f"<0x{b:02X}>"))
    partial["sentencepiece"] = {"ids": ids, "decoded": sp.decode(ids)}
    with open(os.path.join(args.out_dir, "partial.json"), "w", encoding="utf-8") as f:
        json.dump(partial, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
