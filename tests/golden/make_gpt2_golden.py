#!/usr/bin/env python3
"""Reference data for the gpt2 models, from Hugging Face transformers' GPT2LMHeadModel (no downloads).

  make_gpt2_golden.py golden OUT_DIR     per case, a randomly initialised GPT2LMHeadModel
                                         (fixed seed, dropout off) written by
                                         save_pretrained (OUT_DIR/CASE/model.safetensors,
                                         config.json: transformers' own file, the tied
                                         lm_head.weight left out) and OUT_DIR/CASE.io.safetensors
                                         with token ids and the logits mixt must reproduce;
                                         OUT_DIR/cases.json maps each case to mixt's model
                                         section; OUT_DIR/sizes.json has gpt2, gpt2_medium,
                                         gpt2_large and gpt2_xl's parameter counts and state
                                         names and shapes (built on the meta device). Generated at test time into the build
                                         directory, once per generator and torch/transformers
                                         version (OUT_DIR/stamp).
  make_gpt2_golden.py check SECTION.json WEIGHTS IO
                                         the other direction: mixt's model section, a
                                         safetensors file mixt wrote (mixt export's names) and
                                         ids/logits of mixt's forward. Loads the weights into
                                         GPT2LMHeadModel, which must take every tensor
                                         (lm_head.weight tied, not in the file) and give the
                                         same logits (max |diff| / max |ref| <= 1e-5); prints
                                         "agree" and the error, exit status 1 otherwise.

The reference is the eager attention (softmax(q k^T / sqrt(d) + causal mask) v), written out
by transformers, so mixt's scaled_dot_product_attention is held to the plain arithmetic.
"""
import json
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

from golden_stamp import Stamp  # tests/golden/golden_stamp.py

TOLERANCE = 1e-5

# (case, mixt model section, ids shape [batch, time]). Small, for 2 CPU cores: a
# power-of-two width, and an odd one with 3 heads and an mlp_dim of its own; one case fills
# the whole context.
CASES = [
    ("tiny", {"name": "gpt2", "vocab_size": 97, "context_length": 32, "num_layers": 2, "num_heads": 4,
              "hidden_dim": 64}, [2, 11]),
    ("odd", {"name": "gpt2", "vocab_size": 101, "context_length": 16, "num_layers": 3, "num_heads": 3,
             "hidden_dim": 48, "mlp_dim": 80}, [3, 16]),
]

# mixt's models and transformers' published configurations (gpt2, gpt2-medium, -large, -xl).
SIZES = {"gpt2": (12, 12, 768), "gpt2_medium": (24, 16, 1024), "gpt2_large": (36, 20, 1280),
         "gpt2_xl": (48, 25, 1600)}


def config_of(section):
    """transformers' GPT2Config for mixt's model section, dropout off unless the section sets it."""
    return GPT2Config(
        vocab_size=section.get("vocab_size", 50257),
        n_positions=section.get("context_length", 1024),
        n_embd=section.get("hidden_dim", 768),
        n_layer=section.get("num_layers", 12),
        n_head=section.get("num_heads", 12),
        n_inner=section.get("mlp_dim"),
        resid_pdrop=section.get("dropout", 0.0),
        embd_pdrop=section.get("dropout", 0.0),
        attn_pdrop=section.get("attention_dropout", 0.0),
        layer_norm_epsilon=section.get("layer_norm_eps", 1e-5),
        activation_function="gelu_new",
        tie_word_embeddings=True,
        bos_token_id=None,  # GPT-2's 50256 lies outside the small vocabularies (transformers warns)
        eos_token_id=None,
        attn_implementation="eager",
    )


def relative_error(got, expected):
    return ((got - expected).abs().max() / expected.abs().max().clamp_min(1e-12)).item()


def golden(out_dir):
    out_dir = Path(out_dir)
    stamp = Stamp(out_dir, __file__)
    if stamp.current():
        return
    index = {}
    for case, section, shape in CASES:
        torch.manual_seed(0)
        model = GPT2LMHeadModel(config_of(section)).eval()
        with torch.no_grad():
            # LayerNorms start at 1 and 0, biases at 0: perturb them so that a swapped or
            # untransposed tensor cannot hide.
            for p in model.parameters():
                if bool((p == p.flatten()[0]).all()):
                    p.add_(0.1 * torch.randn_like(p))
        assert model.lm_head.weight is model.transformer.wte.weight
        model.save_pretrained(out_dir / case, safe_serialization=True)
        written = load_file(out_dir / case / "model.safetensors")
        assert "lm_head.weight" not in written, sorted(written)
        ids = torch.randint(0, section["vocab_size"], shape, dtype=torch.int64)
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        assert list(logits.shape) == shape + [section["vocab_size"]]
        save_file({"ids": ids.contiguous(), "logits": logits.contiguous()}, out_dir / f"{case}.io.safetensors")
        index[case] = section
    (out_dir / "cases.json").write_text(json.dumps(index, indent=1) + "\n")
    sizes = {}
    for name, (layers, heads, width) in SIZES.items():
        with torch.device("meta"):
            model = GPT2LMHeadModel(config_of({"num_layers": layers, "num_heads": heads, "hidden_dim": width}))
        sizes[name] = {"num_layers": layers, "num_params": sum(p.numel() for p in model.parameters()),  # tied: once
                       "state": [[k, list(v.shape)] for k, v in model.state_dict().items() if k != "lm_head.weight"]}
    (out_dir / "sizes.json").write_text(json.dumps(sizes, separators=(",", ":")) + "\n")
    stamp.write()


def check(section_file, weights_file, io_file):
    section = json.loads(Path(section_file).read_text())
    model = GPT2LMHeadModel(config_of(section)).eval()
    state = load_file(weights_file)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if list(missing) != ["lm_head.weight"] or unexpected:
        sys.exit(f"names differ from GPT2LMHeadModel's: missing {missing}, unexpected {unexpected}")
    if model.lm_head.weight is not model.transformer.wte.weight:
        sys.exit("lm_head.weight is no longer tied to transformer.wte.weight")
    io = load_file(io_file)
    with torch.no_grad():
        logits = model(input_ids=io["ids"]).logits
    error = relative_error(io["logits"], logits)
    print(f"{'agree' if error <= TOLERANCE else 'differ'}: max |diff| / max |ref| = {error:.3g}")
    sys.exit(0 if error <= TOLERANCE else 1)


if __name__ == "__main__":
    torch.set_num_threads(2)
    if len(sys.argv) == 3 and sys.argv[1] == "golden":
        golden(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        check(*sys.argv[2:])
    else:
        sys.exit(__doc__)
