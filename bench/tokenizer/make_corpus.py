#!/usr/bin/env python3
"""bench/tokenizer's inputs, from what a Debian system holds (nothing downloaded): documents of
three kinds, interleaved in a fixed shuffled order, the first MB megabytes of them (repeated
only when they are fewer), as JSONL (one {"text"} per line):
  prose    the licence texts and the packages' copyright files;
  code     Python's standard library sources;
  scripts  the translations in /usr/share/locale's gettext catalogs (.mo): Arabic, Chinese,
           Cyrillic, Devanagari, Greek, Hebrew, Japanese, Korean, Thai, ... one catalog a document;
and a GPT-2-style byte-level BPE tokenizer with GPT-2's vocabulary size (50,257) trained on
them by Hugging Face tokenizers. Prints the bytes of each kind on stderr.

    make_corpus.py OUT_DIR [MB]
"""
import gettext
import glob
import json
import os
import random
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

out, megabytes = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 20
os.makedirs(out, exist_ok=True)


def read_texts(paths):
    texts = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                texts.append(f.read())
        except (UnicodeDecodeError, IsADirectoryError, PermissionError):
            pass
    return texts


def translations():
    texts = []
    for path in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo")):
        try:
            with open(path, "rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog
        except (OSError, UnicodeDecodeError, gettext.error if hasattr(gettext, "error") else OSError, Exception):
            continue
        lines = [v for k, v in catalog.items() if k and isinstance(v, str) and v.strip()]
        if lines:
            texts.append("\n".join(lines) + "\n")
    return texts


kinds = {
    "prose": read_texts(sorted(glob.glob("/usr/share/common-licenses/*") + glob.glob("/usr/share/doc/*/copyright"))),
    "code": read_texts(sorted(glob.glob("/usr/lib/python3*/**/*.py", recursive=True))),
    "scripts": translations(),
}
pool = [(kind, text) for kind, texts in kinds.items() for text in texts]
random.Random(0).shuffle(pool)
documents, size, per_kind = [], 0, {kind: 0 for kind in kinds}
while size < megabytes * 1e6:  # the texts again when they are not enough
    for kind, text in pool:
        documents.append(text)
        n = len(text.encode("utf-8"))
        size += n
        per_kind[kind] += n
        if size >= megabytes * 1e6:
            break
with open(os.path.join(out, "documents.jsonl"), "w", encoding="utf-8") as f:
    for d in documents:
        f.write(json.dumps({"text": d}) + "\n")
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator([text for _, text in pool],
                        trainers.BpeTrainer(vocab_size=50257, special_tokens=["<|endoftext|>"],
                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
tok.save(os.path.join(out, "tokenizer.json"))
print(f"{len(documents)} documents, {size / 1e6:.1f} MB (" +
      ", ".join(f"{kind} {n / 1e6:.1f} MB" for kind, n in per_kind.items()) +
      f"); vocabulary {tok.get_vocab_size()}", file=sys.stderr)
