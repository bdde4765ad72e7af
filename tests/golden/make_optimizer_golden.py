#!/usr/bin/env python3
"""Golden values for tests/plugins/optimizers/optimizer_parity_test.cpp, from torch.optim itself.

On the CPU torch.optim runs its single-tensor updates (its default there), the _foreach_
ops (foreach=True: its default on CUDA) or the fused kernels (fused=True); mixt must match
each bit for bit. Besides the parameter, each step records the gradient as the step left
it: the foreach path of Nesterov SGD without weight decay adds the momentum into p.grad,
the others leave it alone, which tells the implementations apart on the CPU, where
foreach and single-tensor give the same parameters.

For each optimizer configuration: a parameter vector and a fixed sequence of gradients;
the golden is the parameter after every torch.optim step. Regenerate with
    python3 tests/golden/make_optimizer_golden.py > tests/golden/optimizers.json
"""
import json

import torch

CASES = [
    ("sgd", {"lr": 0.1}),
    ("sgd", {"lr": 0.05, "momentum": 0.9}),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("sgd", {"lr": 0.05, "momentum": 0.875, "dampening": 0.1, "weight_decay": 3.0517578125e-05}),
    ("adamw", {"lr": 0.001}),
    ("adamw", {"lr": 0.01, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.1}),
    ("adamw", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.0}),
    # fused=True: torch.optim calls at::_fused_sgd_ / at::_fused_adamw_ (CPU kernels since 2.4).
    ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01, "fused": True}),
    ("sgd", {"lr": 0.05, "momentum": 0.875, "dampening": 0.1, "weight_decay": 3.0517578125e-05, "fused": True}),
    ("sgd", {"lr": 0.1, "fused": True}),
    ("adamw", {"lr": 0.01, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.1, "fused": True}),
    ("adamw", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.0, "fused": True}),
    # foreach=True: torch.optim's default on CUDA tensors (_multi_tensor_sgd).
    ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "foreach": True}),
    ("sgd", {"lr": 0.05, "momentum": 0.875, "dampening": 0.1, "weight_decay": 3.0517578125e-05, "foreach": True}),
    ("sgd", {"lr": 0.1, "weight_decay": 0.01, "foreach": True}),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),  # the same without foreach: p.grad untouched
    ("adamw", {"lr": 0.01, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.1, "foreach": True}),
    ("adamw", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.0, "foreach": True}),
]
STEPS = 6
LATE = 2


def main():
    generator = torch.Generator().manual_seed(1234)
    cases = []
    for name, options in CASES:
        initial = torch.randn(7, generator=generator, dtype=torch.float64).float()
        grads = [torch.randn(7, generator=generator, dtype=torch.float64).float() for _ in range(STEPS)]
        param = torch.nn.Parameter(initial.clone())
        torch_options = dict(options)
        if "betas" in torch_options:
            torch_options["betas"] = tuple(torch_options["betas"])
        optimizer = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}[name]([param], **torch_options)
        after, grads_after = [], []
        for grad in grads:
            param.grad = grad.clone()
            optimizer.step()
            after.append(param.detach().tolist())
            grads_after.append(param.grad.tolist())
        cases.append({"optimizer": name, "options": options, "initial": initial.tolist(),
                      "grads": [g.tolist() for g in grads], "after": after, "grads_after": grads_after})
    # Two parameters, a 2-D weight and a 1-D bias; with weight_decay_1d false the bias is
    # in a group of its own with weight decay 0 (what the recipe option means).
    grouped = []
    for name, options in [("sgd", {"lr": 0.1, "momentum": 0.875, "weight_decay": 0.05, "weight_decay_1d": False}),
                          ("adamw", {"lr": 0.01, "weight_decay": 0.2, "weight_decay_1d": False}),
                          ("sgd", {"lr": 0.1, "momentum": 0.875, "weight_decay": 0.05, "weight_decay_1d": False,
                                   "fused": True}),
                          ("adamw", {"lr": 0.01, "weight_decay": 0.2, "weight_decay_1d": False, "fused": True}),
                          ("sgd", {"lr": 0.1, "momentum": 0.875, "weight_decay": 0.05, "weight_decay_1d": False,
                                   "foreach": True}),
                          ("adamw", {"lr": 0.01, "weight_decay": 0.2, "weight_decay_1d": False, "foreach": True})]:
        weight0 = torch.randn(2, 3, generator=generator, dtype=torch.float64).float()
        bias0 = torch.randn(3, generator=generator, dtype=torch.float64).float()
        grads = [(torch.randn(2, 3, generator=generator, dtype=torch.float64).float(),
                  torch.randn(3, generator=generator, dtype=torch.float64).float()) for _ in range(STEPS)]
        weight, bias = torch.nn.Parameter(weight0.clone()), torch.nn.Parameter(bias0.clone())
        torch_options = {k: v for k, v in options.items() if k != "weight_decay_1d"}
        groups = [{"params": [weight]}, {"params": [bias], "weight_decay": 0.0}]
        optimizer = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}[name](groups, **torch_options)
        after = []
        for gw, gb in grads:
            weight.grad, bias.grad = gw.clone(), gb.clone()
            optimizer.step()
            after.append([weight.detach().flatten().tolist(), bias.detach().tolist()])
        grouped.append({"optimizer": name, "options": options, "initial": [weight0.flatten().tolist(), bias0.tolist()],
                        "grads": [[gw.flatten().tolist(), gb.tolist()] for gw, gb in grads], "after": after})
    # A parameter whose first gradient comes late: "late" has none on the first LATE steps, so
    # torch.optim's single-tensor path creates its state then (SGD: the momentum buffer starts
    # as the gradient). The reference for mixt with fused false and foreach true (bit for bit;
    # torch.optim's foreach SGD takes the single-tensor update for a group with a new buffer)
    # and fused true (within float rounding: torch.optim's own fused SGD fails on this case).
    late = []
    for name, options in [("sgd", {"lr": 0.05, "momentum": 0.875, "dampening": 0.1, "weight_decay": 0.01}),
                          ("adamw", {"lr": 0.01, "weight_decay": 0.1})]:
        early0 = torch.randn(7, generator=generator, dtype=torch.float64).float()
        late0 = torch.randn(7, generator=generator, dtype=torch.float64).float()
        grads = [(torch.randn(7, generator=generator, dtype=torch.float64).float(),
                  torch.randn(7, generator=generator, dtype=torch.float64).float()) for _ in range(STEPS)]
        early, late_param = torch.nn.Parameter(early0.clone()), torch.nn.Parameter(late0.clone())
        optimizer = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}[name](
            [early, late_param], foreach=False, **options)
        after = []
        for step, (ge, gl) in enumerate(grads):
            early.grad = ge.clone()
            late_param.grad = gl.clone() if step >= LATE else None
            optimizer.step()
            after.append([early.detach().tolist(), late_param.detach().tolist()])
        late.append({"optimizer": name, "options": options, "late_steps": LATE,
                     "initial": [early0.tolist(), late0.tolist()],
                     "grads": [[ge.tolist(), gl.tolist()] for ge, gl in grads], "after": after})
    print(json.dumps({"torch": torch.__version__, "cases": cases, "grouped_cases": grouped, "late_cases": late},
                     indent=1))


if __name__ == "__main__":
    main()
