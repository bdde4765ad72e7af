#!/usr/bin/env python3
"""Published config.json forms, read by transformers (no downloads): what mixt must read from them.

  make_config_forms_golden.py golden OUT_DIR
      For each form below (the keys of a published checkpoint's config.json, as its hub
      repository holds it; public facts, copied here):
        OUT_DIR/FORM/config.json      the form as published
        OUT_DIR/FORM.options.json     the options mixt's model must take from it, each read off
                                      transformers' own config object (AutoConfig.for_model on
                                      the same dict), by the mapping below
      and, for each form shrunk to a few thousand parameters (sizes cut, every absent key
      still absent):
        OUT_DIR/FORM_small/           config.json (the shrunk form) and model.safetensors
                                      (a seeded model transformers built from that file)
        OUT_DIR/FORM_small.io.safetensors   ids_N and the logits_N transformers gives
      OUT_DIR/forms.json lists the forms with their family ("llama", "gpt2").
      Generated once per generator and torch/transformers version (OUT_DIR/stamp).
"""
import json
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

from golden_stamp import Stamp  # tests/golden/golden_stamp.py

LLAMA_2_7B = {  # meta-llama/Llama-2-7b-hf (transformers 4.31: no rope_theta)
    "_name_or_path": "meta-llama/Llama-2-7b-hf", "architectures": ["LlamaForCausalLM"], "bos_token_id": 1,
    "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "float16",
    "transformers_version": "4.31.0.dev0", "use_cache": True, "vocab_size": 32000}
LLAMA_7B = {  # huggyllama/llama-7b (transformers 4.28: no num_key_value_heads, rope_theta)
    "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 2048,
    "max_sequence_length": 2048, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "pad_token_id": 0, "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "torch_dtype": "float16",
    "transformers_version": "4.28.0.dev0", "use_cache": True, "vocab_size": 32000}
TINYLLAMA = {  # TinyLlama/TinyLlama-1.1B-Chat-v1.0
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632,
    "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 22,
    "num_key_value_heads": 4, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.35.0",
    "use_cache": True, "vocab_size": 32000}
SMOLLM2_135M = {  # HuggingFaceTB/SmolLM2-135M
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 0,
    "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576, "initializer_range": 0.041666666666666664,
    "intermediate_size": 1536, "is_llama_config": True, "max_position_embeddings": 8192, "model_type": "llama",
    "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_interleaved": False, "rope_scaling": None, "rope_theta": 100000,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": True,
    "vocab_size": 49152}
SMOLLM2_360M = dict(SMOLLM2_135M, hidden_size=960, intermediate_size=2560, initializer_range=0.02,
                    num_attention_heads=15, num_hidden_layers=32, num_key_value_heads=5)  # HuggingFaceTB/SmolLM2-360M
LLAMA_3_2_1B = {  # meta-llama/Llama-3.2-1B
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256}
# Not published: only the sizes, every other key left to LlamaConfig (no tie_word_embeddings,
# rms_norm_eps, max_position_embeddings, num_key_value_heads, rope keys).
LLAMA_SIZES_ONLY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
                    "intermediate_size": 5632, "num_attention_heads": 32, "num_hidden_layers": 22,
                    "vocab_size": 32000}
GPT2 = {  # openai-community/gpt2
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12,
    "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}}, "vocab_size": 50257}
GPT2_MEDIUM = dict(GPT2, n_embd=1024, n_head=16, n_layer=24, n_special=0,
                   predict_special_tokens=True)  # openai-community/gpt2-medium
# Not published: GPT2Config's defaults for everything but the vocabulary.
GPT2_VOCAB_ONLY = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 50257}

FORMS = {"llama_2_7b": LLAMA_2_7B, "llama_7b": LLAMA_7B, "tinyllama_1_1b": TINYLLAMA,
         "smollm2_135m": SMOLLM2_135M, "smollm2_360m": SMOLLM2_360M, "llama_3_2_1b": LLAMA_3_2_1B,
         "llama_sizes_only": LLAMA_SIZES_ONLY, "gpt2": GPT2, "gpt2_medium": GPT2_MEDIUM,
         "gpt2_vocab_only": GPT2_VOCAB_ONLY}


def llama_options(c):
    """mixt's llama options as transformers' LlamaConfig holds them."""
    rope = c.rope_parameters
    options = {"vocab_size": c.vocab_size, "context_length": c.max_position_embeddings,
               "num_layers": c.num_hidden_layers, "num_heads": c.num_attention_heads,
               "num_kv_heads": c.num_key_value_heads, "hidden_dim": c.hidden_size, "mlp_dim": c.intermediate_size,
               "head_dim": c.head_dim, "rms_norm_eps": c.rms_norm_eps, "attention_dropout": c.attention_dropout,
               "init_std": c.initializer_range, "tie_embeddings": c.tie_word_embeddings,
               "attention_bias": c.attention_bias, "mlp_bias": c.mlp_bias, "rope_theta": rope["rope_theta"],
               "rope_type": rope["rope_type"]}
    if rope["rope_type"] == "llama3":
        options.update(rope_factor=rope["factor"], rope_low_freq_factor=rope["low_freq_factor"],
                       rope_high_freq_factor=rope["high_freq_factor"],
                       rope_original_context=rope["original_max_position_embeddings"])
    return options


def gpt2_options(c):
    """mixt's gpt2 options as transformers' GPT2Config holds them (n_inner None: 4 x n_embd)."""
    assert c.tie_word_embeddings and c.activation_function == "gelu_new"
    return {"vocab_size": c.vocab_size, "context_length": c.n_positions, "num_layers": c.n_layer,
            "num_heads": c.n_head, "hidden_dim": c.n_embd, "mlp_dim": c.n_inner or 4 * c.n_embd,
            "dropout": c.resid_pdrop, "attention_dropout": c.attn_pdrop, "layer_norm_eps": c.layer_norm_epsilon}


def transformers_config(form):
    fields = {k: v for k, v in form.items() if k != "model_type"}
    return AutoConfig.for_model(form["model_type"], **fields)


def shrunk(form):
    """The form with its sizes cut to a test's, keys it lacks still absent."""
    small = dict(form)
    cuts = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 151, "max_position_embeddings": 64,
            "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 64, "n_ctx": 64}
    for key, value in cuts.items():
        if key in small:
            small[key] = value
    if "rope_scaling" in small and small["rope_scaling"]:
        small["rope_scaling"] = dict(small["rope_scaling"], original_max_position_embeddings=16)
    if form["model_type"] == "gpt2" and "n_embd" not in form:
        small["vocab_size"] = 151  # GPT2Config's 12 layers of 768 stay: a few seconds, once
    return small


def golden(out_dir):
    out_dir = Path(out_dir)
    stamp = Stamp(out_dir, __file__)
    if stamp.current():
        return
    index = {}
    for name, form in FORMS.items():
        family = form["model_type"]
        options_of = llama_options if family == "llama" else gpt2_options
        (out_dir / name).mkdir(exist_ok=True)
        (out_dir / name / "config.json").write_text(json.dumps(form, indent=2) + "\n")
        (out_dir / f"{name}.options.json").write_text(json.dumps(options_of(transformers_config(form)), indent=1) + "\n")

        small = shrunk(form)
        folder = out_dir / f"{name}_small"
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(transformers_config(small)).eval()
        with torch.no_grad():  # norm weights start at 1, biases at 0: perturbed so that a swap shows
            for p in model.parameters():
                if bool((p == p.flatten()[0]).all()):
                    p.add_(0.1 * torch.randn_like(p))
        model.save_pretrained(folder, safe_serialization=True)
        (folder / "config.json").write_text(json.dumps(small, indent=2) + "\n")  # the form, not transformers 5's
        # What a user gets: the folder read back by from_pretrained with the form's config.json,
        # in float32 as mixt computes it (the form's torch_dtype would cast it to float16).
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        vocab = model.config.vocab_size
        io = {}
        for n, shape in enumerate([[2, 9], [1, 1], [1, 24]]):
            ids = torch.randint(0, vocab, shape, dtype=torch.int64)
            with torch.no_grad():
                io[f"ids_{n}"], io[f"logits_{n}"] = ids, model(input_ids=ids).logits.contiguous()
        save_file(io, out_dir / f"{name}_small.io.safetensors")
        index[name] = family
    (out_dir / "forms.json").write_text(json.dumps(index, indent=1) + "\n")
    stamp.write()


if __name__ == "__main__":
    torch.set_num_threads(2)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    if len(sys.argv) == 3 and sys.argv[1] == "golden":
        golden(sys.argv[2])
    else:
        sys.exit(__doc__)
