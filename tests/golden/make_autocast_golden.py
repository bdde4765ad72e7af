#!/usr/bin/env python3
"""Output dtypes under torch.autocast on the CPU, for tests/sdk/autocast_parity_test.cpp.

For each op of the table (conv2d, linear, matmul, softmax, log_softmax, layer_norm,
batch_norm, cross_entropy, add and cat between mixed dtypes), with float32 inputs and,
where it matters, inputs already in the autocast dtype ("low"), the dtype PyTorch's
autocast gives for float16 and bfloat16. Dtypes are written as c10's names (Float, Half,
BFloat16) so C++ compares them with c10::toString. Regenerate with
    python3 tests/golden/make_autocast_golden.py > tests/golden/autocast_dtypes.json
`--device cuda` makes the CUDA table (bench/gpu/precision_check.sh does, on a GPU machine).
"""
import argparse
import json

import torch
import torch.nn.functional as F

NAMES = {torch.float32: "Float", torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float64: "Double"}


def cases(low, device):
    g = torch.Generator().manual_seed(0)

    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

    x4, w4, b4 = r(2, 3, 8, 8), r(4, 3, 3, 3), r(4)
    x2, w2, b2 = r(4, 8), r(5, 8), r(5)
    targets = torch.tensor([0, 1, 2, 4], device=device)
    bn_w, bn_b = r(3), r(3)
    bn_mean, bn_var = torch.zeros(3, device=device), torch.ones(3, device=device)
    return {
        "conv2d": lambda: F.conv2d(x4, w4, b4, padding=1),
        "linear": lambda: F.linear(x2, w2, b2),
        "matmul": lambda: torch.matmul(x2, w2.t()),
        "softmax": lambda: torch.softmax(x2, 1),
        "softmax_low": lambda: torch.softmax(x2.to(low), 1),
        "log_softmax": lambda: torch.log_softmax(x2, 1),
        "log_softmax_low": lambda: torch.log_softmax(x2.to(low), 1),
        "layer_norm": lambda: F.layer_norm(x2, [8], r(8), r(8)),
        "layer_norm_low": lambda: F.layer_norm(x2.to(low), [8], r(8), r(8)),
        "batch_norm": lambda: F.batch_norm(x4[:, :3], bn_mean.clone(), bn_var.clone(), bn_w, bn_b, True, 0.1, 1e-5),
        "batch_norm_low": lambda: F.batch_norm(x4[:, :3].to(low), bn_mean.clone(), bn_var.clone(), bn_w, bn_b, True,
                                               0.1, 1e-5),
        "cross_entropy": lambda: F.cross_entropy(r(4, 5), targets),
        "cross_entropy_low": lambda: F.cross_entropy(r(4, 5).to(low), targets),
        "add_low_float": lambda: torch.add(x2.to(low), x2),
        "cat_low_float": lambda: torch.cat([x2.to(low), x2]),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    device = parser.parse_args().device
    table = {}
    for low in (torch.float16, torch.bfloat16):
        row = {}
        for name, op in cases(low, device).items():
            with torch.autocast(device, dtype=low):
                row[name] = NAMES[op().dtype]
        table[NAMES[low]] = row
    print(json.dumps({"torch": torch.__version__, "device": device, "dtypes": table}, indent=1))


if __name__ == "__main__":
    main()
