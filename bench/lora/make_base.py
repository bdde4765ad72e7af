#!/usr/bin/env python3
"""A transformers folder with llama3_2_1b's shape and random weights (seed 0), fewer decoder
layers if asked, and an llm.c token file of random ids: what bench/lora/run.sh fine-tunes.
Nothing is downloaded.

    bench/lora/make_base.py OUT [--layers 16] [--tokens 65536]
"""
import argparse
import json
import pathlib

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

# meta-llama/Llama-3.2-1B's config.json, the sizes that matter here.
LLAMA3_2_1B = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                   num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                   rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True, bos_token_id=128000,
                   eos_token_id=128001,
                   rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                 "original_max_position_embeddings": 8192, "rope_type": "llama3"})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=65536)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    config = LlamaConfig(**{**LLAMA3_2_1B, "num_hidden_layers": args.layers})
    model = LlamaForCausalLM(config)
    model.save_pretrained(args.out / "base", safe_serialization=True)
    # llm.c's layout for ids above 65,535: a 256-int32 header (magic 20240801, version 7,
    # the count), then uint32 ids.
    ids = np.random.default_rng(0).integers(0, config.vocab_size, args.tokens, dtype=np.uint32)
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240801, 7, args.tokens)
    with open(args.out / "tokens.bin", "wb") as f:
        f.write(header.tobytes())
        f.write(ids.tobytes())
    print(json.dumps({"parameters": sum(p.numel() for p in model.parameters()), "layers": args.layers}))


if __name__ == "__main__":
    main()
