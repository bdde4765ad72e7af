#!/usr/bin/env python3
"""Golden run of torch.amp.GradScaler for tests/sdk/helpers/grad_scaler_parity_test.cpp.

Drives PyTorch's own GradScaler (device "cpu") through a long random sequence: three
optimizers sharing one scaler (SGD with momentum over two tensors, Nesterov SGD with weight
decay over a third, AdamW over a fourth),
1 to 3 accumulated micro-batches per step, gradient clipping (per optimizer)
after an explicit unscale_ on some steps, and inf/-inf/NaN injected into some micro-batches' gradients. A small
growth_interval makes the scale grow often; some huge but finite gradients overflow
float32 only once scaled.

Each micro-batch's gradient is made by backward through loss = sum_i (p_i * g_i), so
p_i.grad accumulates scale * g_i exactly as any scaled backward would. The file records
every g_i, and after every step: the scale, the growth tracker, which optimizers stepped,
and every parameter. Regenerate with
    python3 tests/golden/make_grad_scaler_golden.py > tests/golden/grad_scaler.json
    python3 tests/golden/make_grad_scaler_golden.py --fused > tests/golden/grad_scaler_fused.json
    python3 tests/golden/make_grad_scaler_golden.py --device-path > tests/golden/grad_scaler_device.json

--fused: the same run with torch.optim's fused kernels (SGD and AdamW with fused=True), and
the first step's gradients overflowing, so every optimizer's first step is skipped before
it has any state. GradScaler is made to take its general path for them (unscale_, read
found_inf, call step() only when finite) by clearing _step_supports_amp_scaling on each
optimizer: that is what mixt's GradScaler does with any optimizer. GradScaler's own fused
path (passing grad_scale and found_inf into the kernel) is wrong for SGD with momentum in
torch 2.11 after a skipped first step: the momentum buffers are created with empty_like,
the kernel returns early on found_inf, and the next step reads the uninitialised memory as
momentum (tests/golden/torch_fused_sgd_skip.py shows it), so it cannot be the reference.

--device-path: the fused optimizers on GradScaler's own fused path (_step_supports_amp_scaling:
grad_scale and found_inf go into the kernels, no host read), which mixt's sync-free step
mirrors. The first step is then not forced to overflow, and the script fails if any
optimizer skips a step before its first applied one: that is the case torch gets wrong.
"""
import argparse
import json
import math
import random

import torch

STEPS = 300
SHAPES = [[4, 3], [3], [6], [5]]  # p0, p1 -> SGD; p2 -> Nesterov SGD; p3 -> AdamW
GROUPS = [[0, 1], [2], [3]]
SCALER = {"init_scale": 2.0**14, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 4}
SGD = {"lr": 0.05, "momentum": 0.9}
NESTEROV = {"lr": 0.02, "momentum": 0.8, "nesterov": True, "weight_decay": 0.001}
ADAMW = {"lr": 0.01, "weight_decay": 0.01}
CLIP_MAX_NORM = 1.0


def encode(x):
    """JSON has no inf/NaN: write them as strings."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def flat(t):
    return [encode(v) for v in t.detach().reshape(-1).tolist()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fused", action="store_true", help="fused optimizers, first step overflowing (see above)")
    parser.add_argument("--device-path", action="store_true",
                        help="fused optimizers on GradScaler's _step_supports_amp_scaling path (see above)")
    args = parser.parse_args()
    device_path = args.device_path
    fused = args.fused or device_path
    kind = {"fused": True} if fused else {"foreach": False}
    sgd, nesterov, adamw = ({**o, **({"fused": True} if fused else {})} for o in (SGD, NESTEROV, ADAMW))
    seed = 8 if device_path else 7  # 7's first step overflows: see --device-path above
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]
    initial = [flat(p) for p in params]
    optimizers = [torch.optim.SGD([params[i] for i in GROUPS[0]], **{**kind, **sgd}),
                  torch.optim.SGD([params[i] for i in GROUPS[1]], **{**kind, **nesterov}),
                  torch.optim.AdamW([params[i] for i in GROUPS[2]], **{**kind, **adamw})]
    for opt in optimizers:
        if not device_path:
            opt._step_supports_amp_scaling = False  # GradScaler's general path (a no-op unless fused)
    scaler = torch.amp.GradScaler("cpu", **SCALER)

    steps = []
    for step in range(STEPS):
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        micro = []
        for _ in range(rng.randint(1, 3)):
            magnitude = 10.0 ** rng.uniform(-3, 3)
            if rng.random() < 0.03 or (fused and not device_path and step == 0):  # finite, but scale * g overflows float32
                magnitude = 1e36
            grads = [torch.randn(s, generator=gen) * magnitude for s in SHAPES]
            if rng.random() < 0.08:  # inject a non-finite value into one tensor
                which = rng.randrange(len(grads))
                grads[which].view(-1)[rng.randrange(grads[which].numel())] = rng.choice(
                    [float("inf"), float("-inf"), float("nan")])
            loss = sum((p * g).sum() for p, g in zip(params, grads))
            scaler.scale(loss).backward()
            micro.append([flat(g) for g in grads])
        clip = rng.random() < 0.3
        if clip:
            # Per optimizer: one norm over all would carry one optimizer's inf into the others'
            # gradients after their inf checks (PyTorch behaves the same; it is a usage error).
            for opt, group in zip(optimizers, GROUPS):
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_([params[i] for i in group], CLIP_MAX_NORM)
        applied = []
        for opt in optimizers:
            scaler.step(opt)
            found = sum(v.item() for v in scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values())
            applied.append(found == 0)
        scaler.update()
        if device_path and step == 0 and not all(applied):
            raise SystemExit("--device-path: a skipped first step would reproduce torch's fused SGD bug; change the seed")
        state = scaler.state_dict()
        steps.append({"micro": micro, "clip": clip, "applied": applied, "scale": encode(state["scale"]),
                      "growth_tracker": state["_growth_tracker"], "params": [flat(p) for p in params]})

    print(json.dumps({"torch": torch.__version__, "shapes": SHAPES, "scaler": SCALER, "groups": GROUPS, "sgd": sgd, "nesterov": nesterov, "adamw": adamw,
                      "clip_max_norm": CLIP_MAX_NORM, "initial": initial, "steps": steps}))


if __name__ == "__main__":
    main()
