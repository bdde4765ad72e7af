#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/TARGET/*) from the test fixtures.

    fuzz/make_seeds.py

tokenizer_json: the five tokenizer.json families tests/support/tokenizer_reference.py
builds (GPT-2, Llama 3, Qwen2, Llama 2 byte fallback, Metaspace), trained on
tests/fixtures/text/tokenizer_corpus.txt alone and written compact, each followed by a NUL
and a line of text to encode. recipe: every recipe under recipes/, a NUL, and overrides.
safetensors: small files Python's safetensors writes (each dtype mixt reads, an empty
tensor, a scalar, metadata).
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
    write_safetensors(corpus / "safetensors")
    return 0


def write_safetensors(out):
    import torch
    from safetensors.torch import save_file
    out.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    floats = torch.randn(2, 3, generator=generator)
    save_file({"weight": floats, "bias": torch.arange(3, dtype=torch.float32)}, str(out / "f32"))
    save_file({"h": floats.to(torch.float16), "b": floats.to(torch.bfloat16), "d": floats.double()},
              str(out / "halves_and_double"))
    save_file({"i64": torch.arange(4), "i32": torch.arange(4, dtype=torch.int32),
               "i16": torch.arange(4, dtype=torch.int16), "i8": torch.arange(-2, 2, dtype=torch.int8),
               "u8": torch.arange(4, dtype=torch.uint8), "mask": torch.tensor([True, False])},
              str(out / "integers_and_bool"))
    save_file({"empty": torch.zeros(0, 4), "scalar": torch.tensor(3.5)}, str(out / "empty_and_scalar"),
              metadata={"format": "pt", "note": "seed"})


if __name__ == "__main__":
    sys.exit(main())
