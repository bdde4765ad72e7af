#!/usr/bin/env python3
"""Golden runs of timm's ModelEmaV3 for tests/plugins/callbacks/ema_test.cpp.

A module with a Linear (fc) and a BatchNorm1d (bn: float buffers and the integer
num_batches_tracked) takes a random state at every optimizer step; timm's ModelEmaV3
(foreach) follows it, updated as timm's train.py does (`model_ema.update(model,
step=num_updates)`) on the steps the test's schedule applies: not on a skipped step (mixt
leaves the average where it is when the precision policy skipped), and every `every`
steps. Each case records its options and the average after the last step. Regenerate with
    python3 tests/golden/make_ema_golden.py > tests/golden/ema.json
"""
import json

import timm
import torch
from timm.utils.model_ema import ModelEmaV3

STEPS = 12
SKIPPED = {5}  # steps the precision policy skipped


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)
        self.bn = torch.nn.BatchNorm1d(4)


def states(generator):
    out = []
    for step in range(STEPS + 1):
        state = {}
        for name, value in Net().state_dict().items():
            if value.is_floating_point():
                state[name] = torch.randn(value.shape, generator=generator)
            else:
                state[name] = torch.tensor(step, dtype=value.dtype)
        out.append(state)
    return out


def run(options, sequence):
    model = Net()
    model.load_state_dict(sequence[0])
    ema = ModelEmaV3(model, decay=options["decay"], min_decay=options.get("min_decay", 0.0),
                     update_after_step=options.get("update_after_step", 0), use_warmup=options.get("warmup", False),
                     warmup_gamma=options.get("warmup_gamma", 1.0), warmup_power=options.get("warmup_power", 2 / 3),
                     foreach=True)
    every = options.get("every", 1)
    for step in range(1, STEPS + 1):
        model.load_state_dict(sequence[step])
        if step not in SKIPPED and step % every == 0:
            ema.update(model, step=step)
    return {name: value.tolist() for name, value in ema.module.state_dict().items()}


def main():
    sequence = states(torch.Generator().manual_seed(0))
    cases = [
        {"decay": 0.9},
        {"decay": 0.9999, "warmup": True},
        {"decay": 0.99, "warmup": True, "warmup_gamma": 10.0, "warmup_power": 0.75, "update_after_step": 3,
         "every": 2, "min_decay": 0.2},
    ]
    out = {"timm": timm.__version__, "torch": torch.__version__, "steps": STEPS, "skipped": sorted(SKIPPED),
           "states": [{name: value.tolist() for name, value in state.items()} for state in sequence],
           "cases": [{"options": c, "average": run(c, sequence)} for c in cases]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
