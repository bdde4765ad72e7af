#!/usr/bin/env python3
"""PyTorch FSDP2's counterpart of a sharded mixt run, for bench/sharding/memory.py: GPT-2 124M
(transformers' GPT2LMHeadModel, the same shape as mixt's gpt2 at the same context), float32,
AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1 on 2-D weights, foreach), clipping at 1.0,
`fully_shard` on each transformer block then on the whole model (reshard_after_forward=True,
as torchtitan does), Gloo on the CPU. Each rank trains on its own windows of the same token
file and prints one JSON line: its peak RSS and the tokens/s of the timed steps.
--bf16: FSDP2's MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32), float32
sharded weights gathered in bfloat16 and gradients reduced in float32: mixt's bf16_master
under sharding: parameters.

    torchrun --standalone --nproc-per-node=N bench/sharding/fsdp2_gpt2.py --tokens T.bin --context 256 --steps 3 [--bf16]
"""
import argparse
import json
import resource
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(1337)
    config = GPT2Config(n_positions=args.context, n_embd=768, n_layer=12, n_head=12, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    model = GPT2LMHeadModel(config)
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if args.bf16 else None,
                                     reduce_dtype=torch.float32 if args.bf16 else None)
    for block in model.transformer.h:
        fully_shard(block, mesh=mesh, reshard_after_forward=True, mp_policy=mp_policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=True, mp_policy=mp_policy)
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                                  lr=6e-4, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    data = np.memmap(args.tokens, dtype=np.uint16, mode="r")
    window = args.context + 1
    started = None
    for step in range(args.steps + 1):  # the first step is not timed
        if step == 1:
            started = time.perf_counter()
        first = ((step * world + rank) * args.batch) * window
        chunk = torch.from_numpy(np.array(data[first:first + args.batch * window], dtype=np.int64))
        chunk = chunk.view(args.batch, window)
        logits = model(chunk[:, :-1]).logits  # as mixt's causal_lm: every position predicts the next token
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), chunk[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - started
    tokens = args.steps * args.batch * args.context * world
    print(json.dumps({"side": "fsdp2", "rank": rank, "world": world,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "tokens_per_s": tokens / seconds, "loss": loss.item()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
