#!/usr/bin/env python3
"""The plain-PyTorch side of bench/gpt2_compare.sh.

transformers' GPT2LMHeadModel (GPT-2 124M: 12 layers, width 768, 12 heads, SDPA attention),
or with --model smollm2 its LlamaForCausalLM at SmolLM2-135M's shape (30 layers, width 576,
9 heads sharing 3 key/value heads, vocabulary 49,152, tied head), trained in eager mode on windows of a uint16 token file (the file mixt reads: nanoGPT's
format, windows of context + 1 tokens every context tokens, the inputs and their next
tokens), with recipes/gpt2/gpt2_124m.yaml's settings: AdamW lr 6e-4 held constant (the
comparison passes scheduler=null to mixt), betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on
the parameters of two or more dimensions only, the gradient norm clipped to 1.0, the loss
nanoGPT's cross-entropy over every position. For each precision policy:

  fp32            TF32 off for cuBLAS and cuDNN
  tf32            TF32 on for matmul and convolution (on the CPU: fp32)
  amp_fp16        torch.autocast(float16) + torch.amp.GradScaler (default settings)
  custom_scaler   the same as amp_fp16 (PyTorch's scaler; mixt's has hysteresis 2): a note says so
  amp_bf16        torch.autocast(bfloat16), no scaler
  bf16_master     the model in bfloat16 under autocast(bfloat16); after backward the gradients
  fp16_master     go to float32 master copies, which AdamW updates and which are copied back
                  (fp16_master: float16 and a GradScaler on the masters' gradients, Apex O2)
  bf16_true       the model and AdamW's state in bfloat16 (Lightning's bf16-true), under
                  autocast(bfloat16) as mixt's policy is (for the loss)
  fp8_tensorwise  torchao's float8 training (Float8LinearConfig.from_recipe_name) on the
  fp8_rowwise     transformer's linear layers (Conv1D turned into nn.Linear first: torchao
                  converts nn.Linear only) but the first and the last (mixt's
                  exclude_first_last), the rest as bf16_master; rowwise emulated on the CPU
  fp8_delayed     none (Transformer Engine's delayed scaling is not plain PyTorch): an error row

--checkpointing: transformers' gradient_checkpointing_enable() (non-reentrant
torch.utils.checkpoint around every block), the row marked activation_checkpointing "all".

Each policy runs in a fresh subprocess (clean allocator peak and process memory). Prints one
JSON object per policy with the fields of `mixt bench`'s bench.json, plus tokens_per_s.
"""
import argparse
import dataclasses
import json
import math
import resource
import subprocess
import sys
import time

MASTER = {"bf16_master": "bfloat16", "fp16_master": "float16"}
FLOAT8 = {"fp8_tensorwise": "tensorwise", "fp8_rowwise": "rowwise"}
KNOWN = ["fp32", "tf32", "amp_fp16", "custom_scaler", "amp_bf16", "bf16_master", "fp16_master", "bf16_true",
         "fp8_tensorwise", "fp8_rowwise"]


def windows(path, context):
    """The token file as [windows, context + 1] starting every context tokens (mixt's tokens dataset)."""
    import numpy as np
    ids = np.fromfile(path, dtype=np.uint16)
    count = (len(ids) - 1) // context
    starts = np.arange(count) * context
    return ids, starts


def linear_from_conv1d(model):
    """transformers' Conv1D (weight [in, out], y = x W + b) as nn.Linear (weight [out, in]),
    the same function, so that torchao's converter finds the transformer's linear layers."""
    import torch
    from transformers.pytorch_utils import Conv1D
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, Conv1D):
                linear = torch.nn.Linear(child.weight.shape[0], child.weight.shape[1], dtype=child.weight.dtype,
                                         device=child.weight.device)
                with torch.no_grad():
                    linear.weight.copy_(child.weight.t())
                    linear.bias.copy_(child.bias)
                setattr(module, child_name, linear)
    return model


def run_one(args):
    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    device = torch.device(args.device)
    torch.manual_seed(0)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    policy = args.precision
    if policy == "fp8_delayed":
        raise SystemExit("no plain-PyTorch counterpart (Transformer Engine's delayed scaling)")
    if policy not in KNOWN:
        raise SystemExit(f"unknown policy {policy}")
    if policy in FLOAT8:  # first, so that a machine without torchao answers at once
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    tf32 = policy == "tf32"
    torch.backends.cuda.matmul.fp32_precision = "tf32" if tf32 else "ieee"
    torch.backends.cudnn.conv.fp32_precision = "tf32" if tf32 else "ieee"

    if args.model == "smollm2":
        from transformers import LlamaConfig, LlamaForCausalLM
        config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                             num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=max(8192, args.context),
                             rope_theta=100000.0, tie_word_embeddings=True, use_cache=False,
                             attn_implementation="sdpa")
        model = LlamaForCausalLM(config).to(device)
    else:
        config = GPT2Config(vocab_size=args.vocab, n_positions=args.context, n_embd=args.hidden, n_layer=args.layers,
                            n_head=args.heads, resid_pdrop=args.dropout, embd_pdrop=args.dropout,
                            attn_pdrop=args.dropout, use_cache=False)
        model = GPT2LMHeadModel(config).to(device)
    model.train()
    if args.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if policy in FLOAT8:
        linear_from_conv1d(model)
        names = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        excluded = {names[0], names[-1]}  # mixt's exclude_first_last (named_modules order)
        fp8_config = Float8LinearConfig.from_recipe_name(FLOAT8[policy])
        if device.type == "cpu" and FLOAT8[policy] == "rowwise":
            fp8_config = dataclasses.replace(fp8_config, emulate=True)
        convert_to_float8_training(model, config=fp8_config,
                                   module_filter_fn=lambda m, fqn: fqn not in excluded
                                   and m.in_features % 16 == 0 and m.out_features % 16 == 0)

    master_dtype = {"bf16_master": torch.bfloat16, "fp16_master": torch.float16}.get(policy)
    if policy in FLOAT8:
        master_dtype = torch.bfloat16
    if master_dtype is not None or policy == "bf16_true":
        model.to(master_dtype or torch.bfloat16)
    params = [p for p in model.parameters() if p.requires_grad]
    trained = [p.detach().clone().float().requires_grad_(False) for p in params] if master_dtype else params

    def groups(tensors):
        return [{"params": [t for t in tensors if t.ndim >= 2]},
                {"params": [t for t in tensors if t.ndim < 2], "weight_decay": 0.0}]

    optimizer = torch.optim.AdamW(groups(trained), lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                                  fused=True if args.fused else None)
    amp_dtype = {"amp_fp16": torch.float16, "custom_scaler": torch.float16, "fp16_master": torch.float16}.get(
        policy, torch.float32 if policy in ("fp32", "tf32") else torch.bfloat16)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    scale_history = []

    ids, starts = windows(args.tokens, args.context)
    order = np.random.default_rng(0).permutation(len(starts))
    offsets = np.arange(args.context + 1)

    def batch(i):
        chosen = order[[(i * args.batch + k) % len(order) for k in range(args.batch)]]
        block = torch.from_numpy(ids[starts[chosen][:, None] + offsets].astype(np.int64))
        return block[:, :-1].to(device), block[:, 1:].to(device)

    def step(i):
        inputs, targets = batch(i)
        optimizer.zero_grad(set_to_none=True)
        if master_dtype:
            for p in params:
                p.grad = None
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype != torch.float32):
            logits = model(input_ids=inputs).logits
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        scaler.scale(loss).backward()
        if master_dtype:
            for master, p in zip(trained, params):
                master.grad = p.grad.float()
                p.grad = None
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        scaler.step(optimizer)
        scaler.update()
        if master_dtype:
            with torch.no_grad():
                torch._foreach_copy_(params, trained)
        if scaler.is_enabled():
            scale_history.append(scaler._get_scale_async().clone())
        return loss.detach()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    # Timed as mixt bench times: the gaps between consecutive marks, one before the first
    # step and one after each (CUDA events on the stream, no host synchronisation inside).
    def mark():
        if device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    marks = [mark()]
    loss = None
    for i in range(args.warmup + args.steps):
        loss = step(i)
        marks.append(mark())
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        times = [a.elapsed_time(b) for a, b in zip(marks, marks[1:])]
        peak = torch.cuda.max_memory_allocated(device) / 2**20
        memory_kind = "CUDA caching-allocator peak"
    else:
        times = [(b - a) * 1000.0 for a, b in zip(marks, marks[1:])]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        memory_kind = "process peak RSS"
    timed = sorted(times[args.warmup:])
    skipped = 0
    if scale_history:
        scales = torch.stack(scale_history).tolist()
        skipped = sum(after < before for before, after in zip([scaler._init_scale] + scales, scales))

    def percentile(q):
        position = q * (len(timed) - 1)
        below = math.floor(position)
        above = min(below + 1, len(timed) - 1)
        return timed[below] + (timed[above] - timed[below]) * (position - below)

    loss_value = float(loss)
    samples_per_s = 1000.0 * args.batch * len(timed) / sum(timed)
    row = {"policy": policy, "device": str(device), "batch": args.batch, "context": args.context,
           "steps": args.steps, "warmup": args.warmup, "images_per_s": samples_per_s,
           "tokens_per_s": samples_per_s * args.context, "step_ms_p50": percentile(0.5),
           "step_ms_p95": percentile(0.95), "peak_memory_mib": peak, "memory_kind": memory_kind,
           "loss": loss_value, "loss_finite": math.isfinite(loss_value), "skipped_steps": skipped,
           "torch": torch.__version__}
    if args.checkpointing:
        row["activation_checkpointing"] = "all"
    if policy == "custom_scaler":
        row["note"] = "torch.amp.GradScaler (amp_fp16's), not mixt's hysteresis scaler"
    print(json.dumps(row))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", required=True, help="uint16 token file (nanoGPT's format)")
    parser.add_argument("--model", default="gpt2", choices=["gpt2", "smollm2"])
    parser.add_argument("--precision", default="fp32,tf32,amp_fp16,amp_bf16")
    parser.add_argument("--device", default="cuda" if "--device" not in sys.argv and _cuda() else "cpu")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--fused", action="store_true", help="torch.optim.AdamW(fused=True)")
    parser.add_argument("--checkpointing", action="store_true", help="gradient_checkpointing_enable()")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args)
        return
    for policy in args.precision.split(","):
        command = [sys.executable, __file__, "--one", "--model", args.model, "--tokens", args.tokens, "--precision", policy,
                   "--device", args.device, "--batch", str(args.batch), "--context", str(args.context),
                   "--layers", str(args.layers), "--hidden", str(args.hidden),
                   "--heads", str(args.heads), "--vocab", str(args.vocab), "--dropout", str(args.dropout),
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads)]
        command += (["--fused"] if args.fused else []) + (["--checkpointing"] if args.checkpointing else [])
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            row = {"policy": policy, "error": (result.stderr.strip().splitlines() or ["failed"])[-1]}
            if args.checkpointing:
                row["activation_checkpointing"] = "all"
            print(json.dumps(row))
        else:
            print(result.stdout.strip().splitlines()[-1])
        sys.stdout.flush()


def _cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


if __name__ == "__main__":
    main()
