#!/usr/bin/env python3
"""bench/tokenizer's inputs, from what every Debian has (nothing downloaded): the licence
texts and the packages' copyright files as documents (JSONL, one per file), the first MB
megabytes of them (repeated only when they are fewer), and a GPT-2-style byte-level BPE tokenizer with GPT-2's
vocabulary size (50,257) trained on them by Hugging Face tokenizers.

    make_corpus.py OUT_DIR [MB]
"""
import glob
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

out, megabytes = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 20
os.makedirs(out, exist_ok=True)
files = sorted(glob.glob("/usr/share/common-licenses/*") + glob.glob("/usr/share/doc/*/copyright"))
texts = []
for path in files:
    try:
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    except (UnicodeDecodeError, IsADirectoryError):
        pass
documents, size = [], 0
while size < megabytes * 1e6:  # the texts again when they are not enough
    for text in texts:
        documents.append(text)
        size += len(text.encode("utf-8"))
        if size >= megabytes * 1e6:
            break
with open(os.path.join(out, "documents.jsonl"), "w", encoding="utf-8") as f:
    for d in documents:
        f.write(json.dumps({"text": d}) + "\n")
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=50257, special_tokens=["<|endoftext|>"],
                                                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                   show_progress=False))
tok.save(os.path.join(out, "tokenizer.json"))
print(f"{len(documents)} documents, {size / 1e6:.1f} MB; vocabulary {tok.get_vocab_size()}", file=sys.stderr)
