#!/usr/bin/env python3
"""ResNet-50 inference images/s from mixt export's files (docs/benchmarks.md, "Exported models").

    bench/export_inference.sh [THREADS]   # exports, then runs this script

    export_inference.py MODEL.onnx MODEL.pt MODEL.safetensors THREADS

Times, at batch 1 and 32 on 224x224 inputs: ONNX Runtime (CPUExecutionProvider) on mixt's
ONNX file, LibTorch's TorchScript interpreter on mixt's TorchScript file (torch.jit.load:
the runtime torch::jit::load is in C++), and PyTorch eager on torchvision's resnet50 with the
weights of mixt's safetensors file. Not a test: nothing passes or fails on time.
"""
import sys
import time

import numpy as np
import onnxruntime as ort
import torch
import torchvision
from safetensors.torch import load_file


def rate(run, batch, seconds=10.0, warmup=2):
    for _ in range(warmup):
        run()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or count < 3:
        run()
        count += 1
    return batch * count / (time.perf_counter() - start)


def main():
    onnx_file, ts_file, weights, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    torch.set_num_threads(threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(onnx_file, options, providers=["CPUExecutionProvider"])
    scripted = torch.jit.load(ts_file).eval()
    eager = torchvision.models.resnet50()
    eager.load_state_dict(load_file(weights))
    eager.eval()
    rows = []
    for batch in (1, 32):
        x = torch.randn(batch, 3, 224, 224)
        xn = x.numpy()
        with torch.no_grad():
            rows.append((batch, rate(lambda: session.run(["output"], {"input": xn}), batch),
                         rate(lambda: scripted(x), batch), rate(lambda: eager(x), batch)))
    print(f"ResNet-50 inference, 3x224x224 float32, {threads} threads, images/s")
    print("| batch | ONNX Runtime (mixt's .onnx) | TorchScript (mixt's .pt) | PyTorch eager (torchvision) |")
    print("|---:|---:|---:|---:|")
    for batch, a, b, c in rows:
        print(f"| {batch} | {a:.1f} | {b:.1f} | {c:.1f} |")


if __name__ == "__main__":
    main()
