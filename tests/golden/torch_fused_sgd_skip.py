#!/usr/bin/env python3
"""torch.optim.SGD(fused=True, momentum>0) under torch.amp.GradScaler, first step skipped.

Why tests/golden/grad_scaler_fused.json takes GradScaler's general path, and what the
fused rows of bench/resnet50_compare.sh --fused mean for PyTorch (docs/benchmarks.md).

fused=True optimizers advertise _step_supports_amp_scaling, so GradScaler.step() hands
them grad_scale and found_inf instead of skipping the step itself. torch/optim/sgd.py
`_fused_sgd` then creates the momentum buffers with torch.empty_like on the first call and
runs the kernel with is_first_step=True; on an overflow the kernel returns at once
(`if (found_inf_ptr && *found_inf_ptr == 1) return;`), so the buffers stay uninitialised.
The next, finite step sees buffers, runs with is_first_step=False, and reads that memory
as momentum. Under float16 autocast the first steps usually overflow (the scale starts at
2^16 and backs off), so this is the common case, not a corner.

Prints the parameter and momentum buffer after each of three steps (overflow, then two
finite ones) for fused=False and fused=True, and exits 1 when the two disagree.
    python3 tests/golden/torch_fused_sgd_skip.py
"""
import sys

import torch


def run(fused):
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.SGD([param], lr=0.1, momentum=0.9, fused=fused)
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    rows = []
    for step, magnitude in enumerate((1e38, 1.0, 1.0)):  # step 0: scale * gradient overflows float32
        optimizer.zero_grad()
        scaler.scale((param * magnitude).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
        buffer = optimizer.state[param].get("momentum_buffer")
        rows.append((step, param.detach().clone(), None if buffer is None else buffer.clone()))
    return rows


def main():
    print(f"torch {torch.__version__}: SGD(lr=0.1, momentum=0.9) + GradScaler('cpu', init_scale=4), "
          "step 0 overflows and is skipped")
    reference, fused = run(False), run(True)
    for (step, p_ref, b_ref), (_, p_fused, b_fused) in zip(reference, fused):
        print(f"step {step}  fused=False: param {p_ref.tolist()} momentum {None if b_ref is None else b_ref.tolist()}")
        print(f"        fused=True:  param {p_fused.tolist()} momentum {None if b_fused is None else b_fused.tolist()}")
    agree = all(torch.equal(a[1], b[1]) for a, b in zip(reference, fused))
    print("fused and single-tensor SGD agree" if agree else
          "fused SGD differs: its momentum started from an uninitialised buffer after the skipped step")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
