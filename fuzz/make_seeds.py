#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/TARGET/*) from the test fixtures.

    fuzz/make_seeds.py

tokenizer_json: the five tokenizer.json families tests/support/tokenizer_reference.py
builds (GPT-2, Llama 3, Qwen2, Llama 2 byte fallback, Metaspace), trained on
tests/fixtures/text/tokenizer_corpus.txt alone and written compact, each followed by a NUL
and a line of text to encode. recipe: every recipe under recipes/, a NUL, and overrides.
"""
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
import tokenizer_reference as reference  # noqa: E402

TEXTS = ["Hello, world! It's 2026 and naïve café ünïcödé — 東京 🙂\n\tindented",
         "    def f(x):\n        return x ** 2  # comment",
         "<|endoftext|> special <s> and </s> tokens inside"]
OVERRIDES = "trainer.epochs=2\noptimizer.lr=0.001\ndata.train.batch_size=8\nmodel.name=resnet18"


def main():
    corpus = ROOT / "fuzz" / "corpus"
    out = corpus / "tokenizer_json"
    out.mkdir(parents=True, exist_ok=True)
    files = [str(ROOT / "tests" / "fixtures" / "text" / "tokenizer_corpus.txt")]
    families = (("gpt2_style", reference.gpt2_style), ("llama3_style", reference.llama3_style),
                ("qwen2_style", reference.qwen2_style), ("llama2_style", reference.llama2_style),
                ("metaspace_style", reference.metaspace_style))
    for index, (name, build) in enumerate(families):
        compact = json.dumps(json.loads(build(files).to_str()), separators=(",", ":"), ensure_ascii=False)
        text = TEXTS[index % len(TEXTS)]
        (out / name).write_bytes(compact.encode() + b"\0" + text.encode())
    out = corpus / "recipe"
    out.mkdir(parents=True, exist_ok=True)
    for recipe in sorted((ROOT / "recipes").rglob("*.yaml")):
        name = str(recipe.relative_to(ROOT / "recipes")).replace(os.sep, "_")
        (out / name).write_bytes(recipe.read_bytes() + b"\0" + OVERRIDES.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
