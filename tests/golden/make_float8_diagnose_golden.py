#!/usr/bin/env python3
"""Golden counts for mixt diagnose's float8 part (tests/diagnose/diagnose_test.cpp,
Float8Range.*): of a tensor's finite non-zero values, how many a float8 cast under a scale
turns into zero (underflow) and how many its clamp cuts (saturated: |x*scale| more than
half a step above the format's largest value, where rounding alone would not land on it).

The scales and the cast are torchao 0.18's (torchao.float8.float8_utils: tensor_to_scale,
to_fp8_saturated), the format's largest value and the step below it read off the 256 bit
patterns of the float8 dtype itself. Cases: a tensor of ordinary values with a few huge
outliers under its own tensorwise scale (the outliers make the rest underflow), the same
values under a fixed scale from an earlier, smaller amax (a jump: the outliers saturate),
and an output gradient in e5m2. Regenerate with
    python3 tests/golden/make_float8_diagnose_golden.py > tests/golden/float8_diagnose.json
"""
import json

import numpy  # noqa: F401
import torch
from torchao.float8.float8_utils import tensor_to_scale, to_fp8_saturated


def largest_and_below(dtype):
    patterns = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).float()
    finite = torch.unique(patterns[torch.isfinite(patterns)])
    return finite[-1].item(), finite[-2].item()


def counts(x, scale, dtype):
    largest, below = largest_and_below(dtype)
    nonzero = torch.isfinite(x) & (x != 0)
    scaled = x.float() * scale
    underflow = nonzero & (to_fp8_saturated(scaled, dtype).float() == 0)
    saturated = nonzero & (scaled.abs() > largest + (largest - below) / 2)
    return {"nonzero": int(nonzero.sum()), "underflow": int(underflow.sum()), "saturated": int(saturated.sum())}


def values(t):
    return [float(numpy.float32(v)) for v in t.flatten().tolist()]


def main():
    torch.manual_seed(0)
    cases = []
    # 64 x 32 ordinary values (normal, about 1) with four outliers of 1e6 and some zeros.
    x = torch.randn(64, 32)
    x[x.abs() < 0.05] = 0
    x[0, 0], x[5, 3], x[17, 9], x[40, 31] = 1e6, -1e6, 5e5, 2e6
    tensorwise = tensor_to_scale(x.abs().max(), torch.float8_e4m3fn).float()
    cases.append({"name": "outliers_tensorwise_e4m3", "dtype": "e4m3", "scale": tensorwise.item(),
                  **counts(x, tensorwise, torch.float8_e4m3fn)})
    # The same under a scale an earlier step's amax of 4 gave (delayed scaling): a jump.
    delayed = tensor_to_scale(torch.tensor(4.0), torch.float8_e4m3fn).float()
    cases.append({"name": "outliers_delayed_e4m3", "dtype": "e4m3", "scale": delayed.item(),
                  **counts(x, delayed, torch.float8_e4m3fn)})
    # An output gradient (values about 1e-4, a few 1e3) under its tensorwise e5m2 scale, and
    # under a scale from an amax of 1e-3.
    g = torch.randn(64, 32) * 1e-4
    g[3, 3], g[30, 30] = 1e3, -2e3
    g_scale = tensor_to_scale(g.abs().max(), torch.float8_e5m2).float()
    cases.append({"name": "grad_tensorwise_e5m2", "dtype": "e5m2", "scale": g_scale.item(),
                  **counts(g, g_scale, torch.float8_e5m2)})
    g_delayed = tensor_to_scale(torch.tensor(1e-3), torch.float8_e5m2).float()
    cases.append({"name": "grad_delayed_e5m2", "dtype": "e5m2", "scale": g_delayed.item(),
                  **counts(g, g_delayed, torch.float8_e5m2)})
    tensors = {"x": {"shape": list(x.shape), "values": values(x)}, "g": {"shape": list(g.shape), "values": values(g)}}
    for case in cases:
        case["tensor"] = "x" if case["name"].startswith("outliers") else "g"
    print(json.dumps({"tensors": tensors, "cases": cases}))


if __name__ == "__main__":
    main()
