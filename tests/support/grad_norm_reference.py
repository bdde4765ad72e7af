#!/usr/bin/env python3
"""PyTorch's side of tests/train/gradient_norm_test.cpp.

Replays a short mixt training run in plain PyTorch: the test's two-layer MLP (Linear(8, 16),
ReLU, Linear(16, 4)) from the initial weights mixt started from, the batches mixt's trainer
was served, SGD (lr 0.05, momentum 0.9), cross-entropy, and the precision policy's steps as
PyTorch users write them:

  fp32         loss.backward(); clip_grad_norm_(params)
  amp_fp16     autocast("cpu", float16); GradScaler("cpu"): scale(loss).backward(),
               unscale_(opt), clip_grad_norm_(params), step, update
  bf16_master  the model cast to bfloat16, float32 masters (copies of the cast weights) in
               the optimizer; autocast("cpu", bfloat16); the model's gradients handed to the
               masters as float32; clip_grad_norm_(masters); the masters rounded back

Writes the value torch.nn.utils.clip_grad_norm_ returned at every step (max_norm: the
run's clip, or inf when it did not clip).

Usage: grad_norm_reference.py RUN.json RESULT.json
"""
import json
import math
import sys

import torch
import torch.nn.functional as F


def main(run_file, result_file):
    run = json.load(open(run_file))
    torch.set_num_threads(1)
    model = torch.nn.Sequential()
    model.add_module("hidden", torch.nn.Linear(8, 16))
    model.add_module("relu", torch.nn.ReLU())
    model.add_module("out", torch.nn.Linear(16, 4))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.tensor(run["initial"][name], dtype=torch.float32))
    policy = run["policy"]
    max_norm = run["clip"] if run["clip"] > 0 else math.inf
    params = list(model.parameters())
    if policy == "bf16_master":
        model.to(torch.bfloat16)
        masters = [p.detach().float().clone() for p in model.parameters()]
        stepped = masters
    else:
        stepped = params
    optimizer = torch.optim.SGD(stepped, lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu") if policy == "amp_fp16" else None
    autocast_dtype = {"amp_fp16": torch.float16, "bf16_master": torch.bfloat16}.get(policy)
    norms = []
    for batch in run["batches"]:
        x = torch.tensor(batch["inputs"], dtype=torch.float32)
        y = torch.tensor(batch["targets"], dtype=torch.int64)
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = F.cross_entropy(model(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
        else:
            loss.backward()
        if policy == "bf16_master":
            for master, p in zip(masters, model.parameters()):
                master.grad = p.grad.float()
                p.grad = None
        norms.append(float(torch.nn.utils.clip_grad_norm_(stepped, max_norm)))
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        if policy == "bf16_master":
            with torch.no_grad():
                for master, p in zip(masters, model.parameters()):
                    p.copy_(master)
    json.dump({"norms": norms}, open(result_file, "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
