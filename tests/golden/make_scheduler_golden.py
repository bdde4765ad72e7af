#!/usr/bin/env python3
"""Golden learning-rate curves for tests/plugins/schedulers/scheduler_parity_test.cpp, from
torch.optim.lr_scheduler stepped once per optimizer step.

    python3 tests/golden/make_scheduler_golden.py > tests/golden/schedulers.json
"""
import json

import torch
from torch.optim import lr_scheduler as S


def curve(make, lr, steps):
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=lr)
    scheduler = make(optimizer)
    rates = [optimizer.param_groups[0]["lr"]]
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        rates.append(optimizer.param_groups[0]["lr"])
    return rates


def main():
    cases = []
    # step: decay by gamma every step_epochs epochs of steps_per_epoch steps.
    spe, epochs = 3, 8
    cases.append({"name": "step", "options": {"step_epochs": 2, "gamma": 0.5}, "lr": 0.4,
                  "steps_per_epoch": spe, "epochs": epochs,
                  "rates": curve(lambda o: S.StepLR(o, step_size=2 * spe, gamma=0.5), 0.4, spe * epochs)})
    # cosine with warm-up: SequentialLR(LinearLR, CosineAnnealingLR).
    spe, epochs, warmup = 5, 6, 5
    total = spe * epochs
    cases.append({"name": "cosine", "options": {"warmup_steps": warmup, "start_factor": 0.1, "min_lr": 0.001},
                  "lr": 0.256, "steps_per_epoch": spe, "epochs": epochs,
                  "rates": curve(lambda o: S.SequentialLR(o, [
                      S.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=warmup),
                      S.CosineAnnealingLR(o, T_max=total - warmup, eta_min=0.001)], milestones=[warmup]),
                      0.256, total)})
    # cosine without warm-up, warm-up given in epochs elsewhere.
    cases.append({"name": "cosine", "options": {}, "lr": 0.1, "steps_per_epoch": 4, "epochs": 5,
                  "rates": curve(lambda o: S.CosineAnnealingLR(o, T_max=20), 0.1, 20)})
    # warmup: LinearLR then constant.
    cases.append({"name": "warmup", "options": {"warmup_epochs": 2, "start_factor": 0.25}, "lr": 0.2,
                  "steps_per_epoch": 3, "epochs": 4,
                  "rates": curve(lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=6), 0.2, 12)})
    print(json.dumps({"torch": torch.__version__, "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
