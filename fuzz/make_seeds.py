#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/TARGET/*) from the test fixtures.

    fuzz/make_seeds.py

tokenizer_json: the five tokenizer.json families tests/support/tokenizer_reference.py
builds (GPT-2, Llama 3, Qwen2, Llama 2 byte fallback, Metaspace), trained on
tests/fixtures/text/tokenizer_corpus.txt alone and written compact, each followed by a NUL
and a line of text to encode. recipe: every recipe under recipes/, a NUL, and overrides.
safetensors: small files Python's safetensors writes (each dtype mixt reads, an empty
tensor, a scalar, metadata).
token_file: nanoGPT and llm.c files (uint16 and uint32) as tests/golden/make_token_files.py
writes them, of its known ids, cut short. idx: Fashion-MNIST image and label files of a few
28 x 28 images, plain and gzip-compressed. sentencepiece: a BPE model with byte fallback (as
tests/support/tokenizer_reference.py trains one) and a unigram one without normalization
rules, trained on the same corpus, each after a byte (the text's length) and a text.
jsonl: the conversations tests/golden/make_instruct_golden.py writes (its train.jsonl), and
`mixt tokenize` records ({"text": ...}) of the tokenizer corpus's first lines.
checkpoint: checkpoints as framework/src/checkpoint/checkpoint.cpp writes them (format 2,
its trailer, and format 1, without), of a small archive as LibTorch's OutputArchive makes one
(tensors and a nested module), and a sharded optimizer's manifest. image: a small picture in
each format the image datasets decode (JPEG, progressive JPEG, PNG, BMP, WebP, TIFF, PPM),
and VOC masks as tests/fixtures/data/make_segmentation_folder.py writes them (palette, grey).
transformers_config: config.json as transformers' LlamaConfig writes it (with Llama 3.1's
rope scaling; in transformers 5's rope_parameters form; a Llama-2 file without rope_theta or
num_key_value_heads), then a NUL and a model.safetensors.index.json naming two shards.
"""
import gzip
import json
import os
import struct
import tempfile
import zlib
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
    write_token_files(corpus / "token_file")
    write_idx(corpus / "idx")
    write_sentencepiece(corpus / "sentencepiece", files)
    write_jsonl(corpus / "jsonl", files[0])
    write_checkpoints(corpus / "checkpoint")
    write_images(corpus / "image")
    write_transformers_configs(corpus / "transformers_config")
    return 0


def write_transformers_configs(out):
    from transformers import LlamaConfig
    out.mkdir(parents=True, exist_ok=True)
    small = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=128, architectures=["LlamaForCausalLM"])
    llama3 = LlamaConfig(**small, rope_theta=500000.0,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 64}).to_dict()
    rope_parameters = {k: v for k, v in llama3.items() if k not in ("rope_theta", "rope_scaling")}
    rope_parameters["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    llama2 = {k: v for k, v in LlamaConfig(**small).to_dict().items() if k not in ("rope_theta", "num_key_value_heads")}
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = {"metadata": {"total_size": 1024}, "weight_map": {"model.embed_tokens.weight": shards[0],
                                                              "model.norm.weight": shards[1], "lm_head.weight": shards[1]}}
    for name, config in (("llama3_rope_scaling", llama3), ("rope_parameters", rope_parameters), ("llama2", llama2)):
        (out / name).write_bytes(json.dumps(config, indent=2).encode() + b"\0" + json.dumps(index).encode())


def write_images(out):
    import io
    import numpy as np
    from PIL import Image
    sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "data"))
    import make_segmentation_folder as segmentation  # noqa: E402
    out.mkdir(parents=True, exist_ok=True)
    image, mask = segmentation.draw(np.random.default_rng(0), 12, 16)
    picture = Image.fromarray(image)
    for name, options in (("jpeg", dict(format="JPEG", quality=90)),
                          ("jpeg_progressive", dict(format="JPEG", quality=80, progressive=True)),
                          ("png", dict(format="PNG")), ("bmp", dict(format="BMP")),
                          ("webp", dict(format="WEBP", lossless=True)), ("tiff", dict(format="TIFF")),
                          ("ppm", dict(format="PPM"))):
        written = io.BytesIO()
        picture.save(written, **options)
        (out / name).write_bytes(written.getvalue())
    for name, grey in (("mask_palette.png", False), ("mask_grey.png", True)):
        segmentation.save_mask(mask, str(out / name), grey)


def write_checkpoints(out):
    import torch
    out.mkdir(parents=True, exist_ok=True)
    unit = torch._C.CompilationUnit()
    module = lambda: torch._C.ScriptModule("__torch__.Module", unit, True)
    tensor_type = torch._C.TensorType.get()
    model, optimizer = module(), module()
    model._register_attribute("weight", tensor_type, torch.arange(6, dtype=torch.float32).reshape(2, 3))
    model._register_attribute("bias", tensor_type, torch.tensor([1.0, -2.0], dtype=torch.bfloat16))
    optimizer._register_attribute("step", tensor_type, torch.tensor(3, dtype=torch.int64))
    root = module()
    root._register_attribute("model", model._type(), model)
    root._register_attribute("optimizer", optimizer._type(), optimizer)
    archive = root.save_to_buffer()
    header = json.dumps({"mixt_version": "0.1.0", "epoch": 2, "batches_in_epoch": 5, "global_step": 21,
                         "components": [{"kind": "model", "name": "mlp", "plugin": "model_mlp"}]}).encode()
    start = lambda fmt: b"MIXTCKPT" + struct.pack("<IQ", fmt, len(header)) + header
    trailer = struct.pack("<QI", len(archive), zlib.crc32(archive)) + b"MIXTEND2"
    (out / "format2").write_bytes(start(2) + archive + trailer)
    (out / "format1").write_bytes(start(1) + archive)
    (out / "shard_manifest").write_bytes(b"sharding zero1\nworld_size 2\nlayer.weight [4, 3] Float\n"
                                         b"layer.bias [4] Float\n")


def write_jsonl(out, text_file):
    sys.path.insert(0, str(ROOT / "tests" / "golden"))
    import make_instruct_golden as instruct  # noqa: E402
    out.mkdir(parents=True, exist_ok=True)
    lines = lambda records: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    (out / "instruct_conversations").write_bytes(lines(instruct.SAMPLES + instruct.THINKING))
    texts = Path(text_file).read_text().splitlines()[:12]
    (out / "tokenize_records").write_bytes(lines({"text": t, "id": i} for i, t in enumerate(texts)) + b"\n")


def write_sentencepiece(out, files):
    import sentencepiece as spm
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        models = {}
        for name, options in (("bpe_byte_fallback", dict(model_type="bpe", byte_fallback=True, vocab_size=800,
                                                         character_coverage=0.98, user_defined_symbols=["<tool>"])),
                              ("unigram_identity", dict(model_type="unigram", vocab_size=700, character_coverage=0.98, hard_vocab_limit=False,
                                                        normalization_rule_name="identity"))):
            prefix = os.path.join(scratch, name)
            spm.SentencePieceTrainer.train(input=files[0], model_prefix=prefix, num_threads=1, minloglevel=2, **options)
            models[name] = Path(prefix + ".model").read_bytes()
    for index, (name, model) in enumerate(models.items()):
        text = TEXTS[index % len(TEXTS)].encode()[:255]
        (out / name).write_bytes(bytes([len(text)]) + text + model)


def write_token_files(out):
    sys.path.insert(0, str(ROOT / "tests" / "golden"))
    import make_token_files  # noqa: E402
    out.mkdir(parents=True, exist_ok=True)
    ids = make_token_files.known_ids()[:300]
    header = lambda magic, version, count: struct.pack("<256i", magic, version, count, *([0] * 253))
    (out / "nanogpt").write_bytes(struct.pack(f"<{len(ids)}H", *ids))
    (out / "llmc_uint16").write_bytes(header(20240520, 1, len(ids)) + struct.pack(f"<{len(ids)}H", *ids))
    (out / "llmc_uint32").write_bytes(header(20240801, 7, len(ids)) + struct.pack(f"<{len(ids)}I", *ids))
    (out / "llmc_empty").write_bytes(header(20240520, 1, 0))


def write_idx(out):
    out.mkdir(parents=True, exist_ok=True)
    count, rows, cols = 3, 28, 28
    pixels = bytes((7 * i + 3) % 256 for i in range(count * rows * cols))
    images = struct.pack(">IIII", 0x803, count, rows, cols) + pixels
    labels = struct.pack(">II", 0x801, count) + bytes([9, 0, 4])
    (out / "images").write_bytes(images)
    (out / "labels").write_bytes(labels)
    (out / "images.gz").write_bytes(gzip.compress(images, mtime=0))
    (out / "labels.gz").write_bytes(gzip.compress(labels, mtime=0))


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
