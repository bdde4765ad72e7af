#!/usr/bin/env python3
"""Golden values for tests/unit/optimizer_parity_test.cpp, from torch.optim itself.

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
]
STEPS = 6


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
        after = []
        for grad in grads:
            param.grad = grad.clone()
            optimizer.step()
            after.append(param.detach().tolist())
        cases.append({"optimizer": name, "options": options, "initial": initial.tolist(),
                      "grads": [g.tolist() for g in grads], "after": after})
    print(json.dumps({"torch": torch.__version__, "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
