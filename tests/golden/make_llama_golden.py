#!/usr/bin/env python3
"""Reference data for the llama models, from Hugging Face transformers' LlamaForCausalLM (no downloads).

  make_llama_golden.py golden OUT_DIR    per case, a randomly initialised LlamaForCausalLM
                                         (fixed seed, sdpa attention) written by
                                         save_pretrained (OUT_DIR/CASE/: transformers' own
                                         config.json and model.safetensors), the same weights
                                         with a config.json as transformers 4 wrote it
                                         (OUT_DIR/CASE_v4/: rope_theta and rope_scaling at the
                                         top level), and OUT_DIR/CASE.io.safetensors: token ids
                                         at several lengths (ids_N) with the logits mixt must
                                         reproduce (logits_N), a prompt and transformers'
                                         greedy continuation with and without its cache;
                                         OUT_DIR/cases.json maps each case to mixt's model
                                         section; OUT_DIR/sizes.json has the presets' parameter
                                         counts and state names and shapes (meta device).
                                         Generated once per generator and torch/transformers
                                         version (OUT_DIR/stamp).
  make_llama_golden.py check SECTION.json WEIGHTS IO
                                         the other direction: mixt's model section, a
                                         safetensors file mixt wrote and ids/logits of mixt's
                                         forward. Writes config.json beside the weights and
                                         loads the folder with LlamaForCausalLM.from_pretrained,
                                         which must take every tensor and give the same logits
                                         (max |diff| / max |ref| <= 1e-5); prints "agree" and the
                                         error, exit status 1 otherwise.
"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

from golden_stamp import Stamp  # tests/golden/golden_stamp.py

TOLERANCE = 1e-5
NEW_TOKENS = 12

# (case, mixt model section, ids shapes). One case with grouped-query attention (2 kv heads
# serve 4 query heads) and a tied head; one with Llama 3.1's rope scaling (its original
# context short enough that every band of frequencies is exercised), an untied head, a
# head_dim of its own and biases.
CASES = [
    ("gqa_tied", {"name": "llama", "vocab_size": 97, "context_length": 40, "num_layers": 2, "num_heads": 4,
                  "num_kv_heads": 2, "hidden_dim": 64, "mlp_dim": 96, "rope_theta": 10000.0,
                  "tie_embeddings": True}, [[2, 11], [1, 1], [3, 40]]),
    ("llama3_untied", {"name": "llama", "vocab_size": 103, "context_length": 48, "num_layers": 2, "num_heads": 4,
                       "num_kv_heads": 4, "hidden_dim": 48, "head_dim": 16, "mlp_dim": 80, "rope_theta": 500000.0,
                       "rope_type": "llama3", "rope_factor": 8.0, "rope_low_freq_factor": 1.0,
                       "rope_high_freq_factor": 4.0, "rope_original_context": 16, "tie_embeddings": False,
                       "attention_bias": True, "mlp_bias": True}, [[2, 13], [1, 1], [2, 48]]),
]

# mixt's presets and the shapes of their published config.json files.
PRESETS = {
    "smollm2_135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0,
                         tie_word_embeddings=True),
    "tinyllama_1_1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                           num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048, rope_theta=10000.0,
                           tie_word_embeddings=False),
    "llama3_2_1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                        tie_word_embeddings=True, head_dim=64,
                        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
}


def config_of(section):
    """transformers' LlamaConfig for mixt's model section."""
    rope = {"rope_type": section.get("rope_type", "default"), "rope_theta": section.get("rope_theta", 10000.0)}
    if rope["rope_type"] == "llama3":
        rope.update(factor=section["rope_factor"], low_freq_factor=section["rope_low_freq_factor"],
                    high_freq_factor=section["rope_high_freq_factor"],
                    original_max_position_embeddings=section["rope_original_context"])
    return LlamaConfig(
        vocab_size=section["vocab_size"],
        max_position_embeddings=section["context_length"],
        hidden_size=section["hidden_dim"],
        intermediate_size=section["mlp_dim"],
        num_hidden_layers=section["num_layers"],
        num_attention_heads=section["num_heads"],
        num_key_value_heads=section.get("num_kv_heads", section["num_heads"]),
        head_dim=section.get("head_dim"),
        rope_parameters=rope,
        rms_norm_eps=section.get("rms_norm_eps", 1e-5),
        tie_word_embeddings=section["tie_embeddings"],
        attention_bias=section.get("attention_bias", False),
        mlp_bias=section.get("mlp_bias", False),
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation="sdpa",
    )


def v4_config(config_json):
    """The same config.json as transformers 4 wrote it: rope_theta and rope_scaling at the top level."""
    old = dict(config_json)
    rope = dict(old.pop("rope_parameters"))
    old["rope_theta"] = rope.pop("rope_theta")
    old["rope_scaling"] = None if rope.get("rope_type") == "default" else rope
    return old


def relative_error(got, expected):
    return ((got - expected).abs().max() / expected.abs().max().clamp_min(1e-12)).item()


def golden(out_dir):
    out_dir = Path(out_dir)
    stamp = Stamp(out_dir, __file__)
    if stamp.current():
        return
    index = {}
    for case, section, shapes in CASES:
        torch.manual_seed(0)
        model = LlamaForCausalLM(config_of(section)).eval()
        with torch.no_grad():
            # RMSNorm weights start at 1, biases at 0: perturb them so that a swapped tensor shows.
            for p in model.parameters():
                if bool((p == p.flatten()[0]).all()):
                    p.add_(0.1 * torch.randn_like(p))
        assert (model.lm_head.weight is model.model.embed_tokens.weight) == section["tie_embeddings"]
        model.save_pretrained(out_dir / case, safe_serialization=True)
        written = load_file(out_dir / case / "model.safetensors")
        assert ("lm_head.weight" in written) != section["tie_embeddings"], sorted(written)
        v4 = out_dir / f"{case}_v4"
        v4.mkdir(exist_ok=True)
        shutil.copy(out_dir / case / "model.safetensors", v4 / "model.safetensors")
        (v4 / "config.json").write_text(
            json.dumps(v4_config(json.loads((out_dir / case / "config.json").read_text())), indent=2) + "\n")
        io = {}
        for n, shape in enumerate(shapes):
            ids = torch.randint(0, section["vocab_size"], shape, dtype=torch.int64)
            with torch.no_grad():
                logits = model(input_ids=ids).logits
            assert list(logits.shape) == shape + [section["vocab_size"]]
            io[f"ids_{n}"], io[f"logits_{n}"] = ids.contiguous(), logits.contiguous()
        prompt = torch.randint(0, section["vocab_size"], [1, 5], dtype=torch.int64)
        io["prompt"] = prompt
        for cache in (True, False):
            out = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, use_cache=cache,
                                 pad_token_id=0)
            io[f"greedy_{'cache' if cache else 'nocache'}"] = out[:, prompt.size(1):].contiguous()
        assert torch.equal(io["greedy_cache"], io["greedy_nocache"])
        save_file(io, out_dir / f"{case}.io.safetensors")
        index[case] = section
    (out_dir / "cases.json").write_text(json.dumps(index, indent=1) + "\n")
    sizes = {}
    for name, kw in PRESETS.items():
        with torch.device("meta"):
            model = LlamaForCausalLM(LlamaConfig(**kw))
        tied = kw["tie_word_embeddings"]
        sizes[name] = {"num_layers": kw["num_hidden_layers"], "num_params": sum(p.numel() for p in model.parameters()),
                       "state": [[k, list(v.shape)] for k, v in model.state_dict().items()
                                 if not (tied and k == "lm_head.weight")]}
    (out_dir / "sizes.json").write_text(json.dumps(sizes, separators=(",", ":")) + "\n")
    stamp.write()


def check(section_file, weights_file, io_file):
    section = json.loads(Path(section_file).read_text())
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        config_of(section).save_pretrained(folder)
        shutil.copy(weights_file, folder / "model.safetensors")
        model, info = LlamaForCausalLM.from_pretrained(folder, output_loading_info=True)
    model.eval()
    problems = {k: v for k, v in info.items() if v}
    if problems:
        sys.exit(f"from_pretrained did not take mixt's file as it is: {problems}")
    io = load_file(io_file)
    with torch.no_grad():
        logits = model(input_ids=io["ids"]).logits
    error = relative_error(io["logits"], logits)
    print(f"{'agree' if error <= TOLERANCE else 'differ'}: max |diff| / max |ref| = {error:.3g}")
    sys.exit(0 if error <= TOLERANCE else 1)


if __name__ == "__main__":
    torch.set_num_threads(2)
    transformers.utils.logging.set_verbosity_error()
    if len(sys.argv) == 3 and sys.argv[1] == "golden":
        golden(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        check(*sys.argv[2:])
    else:
        sys.exit(__doc__)
