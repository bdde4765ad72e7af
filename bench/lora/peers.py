#!/usr/bin/env python3
"""One fine-tuning configuration in plain PyTorch, for bench/lora/run.sh: transformers'
LlamaForCausalLM trained whole (AdamW, eager), the same wrapped by PEFT's LoRA, or
torchtune's Llama 3.2 builder with LoRA or QLoRA (its NF4 base from torchao) as its
single-device LoRA recipe builds it. Batch 1, random token windows, float32, cross-entropy on
the next token, torch.optim.AdamW over the trainable parameters. Prints one JSON line: the
median step time after the warm-up, tokens/s and the process's peak RSS (ru_maxrss).

    bench/lora/peers.py DIR --impl eager|peft|torchtune --mode full|lora|qlora
                        [--steps 3] [--warmup 1] [--context 512] [--threads N]
"""
import argparse
import importlib
import json
import pathlib
import resource
import statistics
import sys
import time
import types

import numpy as np
import torch

RANK, ALPHA, TARGETS = 16, 32, ["q_proj", "v_proj"]


def torchao_nf4_alias():
    """torchtune 0.6.1 imports torchao.dtypes.nf4tensor, which torchao 0.18 moved."""
    try:
        importlib.import_module("torchao.dtypes.nf4tensor")
    except ImportError:
        moved = importlib.import_module("torchao.quantization.quantize_.workflows.nf4.nf4_tensor")
        alias = types.ModuleType("torchao.dtypes.nf4tensor")
        alias.__dict__.update(moved.__dict__)
        sys.modules["torchao.dtypes.nf4tensor"] = alias


def transformers_model(base, mode, impl):
    from transformers import LlamaForCausalLM
    model = LlamaForCausalLM.from_pretrained(base, torch_dtype=torch.float32)
    if impl == "peft":
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=TARGETS))
    return lambda ids: model(input_ids=ids).logits, model


def torchtune_model(base, mode):
    torchao_nf4_alias()
    from torchtune.models.llama3_2._component_builders import lora_llama3_2
    from torchtune.modules.peft import get_adapter_params, set_trainable_params
    config = json.loads((pathlib.Path(base) / "config.json").read_text())
    model = lora_llama3_2(
        lora_attn_modules=TARGETS, apply_lora_to_mlp=False, apply_lora_to_output=False,
        vocab_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"], num_kv_heads=config["num_key_value_heads"],
        embed_dim=config["hidden_size"], max_seq_len=2048, intermediate_dim=config["intermediate_size"],
        rope_base=config.get("rope_theta") or config["rope_parameters"]["rope_theta"], norm_eps=config["rms_norm_eps"], scale_factor=32,
        lora_rank=RANK, lora_alpha=ALPHA, lora_dropout=0.0, quantize_base=(mode == "qlora"))
    # The same base weights as the others, as torchtune's checkpointer converts them.
    from safetensors.torch import load_file
    from torchtune.models.convert_weights import hf_to_tune
    weights = hf_to_tune(load_file(pathlib.Path(base) / "model.safetensors"), num_heads=config["num_attention_heads"],
                         num_kv_heads=config["num_key_value_heads"], dim=config["hidden_size"])
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected and all("lora" in name for name in missing), (missing, unexpected)
    del weights
    set_trainable_params(model, get_adapter_params(model))
    return lambda ids: model(ids), model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", type=pathlib.Path)
    parser.add_argument("--impl", choices=["eager", "peft", "torchtune"], required=True)
    parser.add_argument("--mode", choices=["full", "lora", "qlora"], required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = args.dir / "base"
    if args.impl == "torchtune":
        forward, model = torchtune_model(base, args.mode)
    else:
        forward, model = transformers_model(base, args.mode, args.impl)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=2e-4)
    ids = np.fromfile(args.dir / "tokens.bin", dtype=np.uint32, offset=1024).astype(np.int64)
    times = []
    for step in range(args.warmup + args.steps):
        start = step * args.context
        window = torch.from_numpy(ids[start:start + args.context + 1]).unsqueeze(0)
        begin = time.perf_counter()
        logits = forward(window[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), window[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= args.warmup:
            times.append(time.perf_counter() - begin)
    step_s = statistics.median(times)
    print(json.dumps({"impl": args.impl, "mode": args.mode, "step_ms_p50": step_s * 1e3,
                      "tokens_per_s": args.context / step_s, "loss": loss.item(),
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "trainable": sum(p.numel() for p in trainable),
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
