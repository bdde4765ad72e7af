#!/usr/bin/env python3
"""ResNet-50 inference images/s from mixt export's files (docs/benchmarks.md, "Exported models").

    bench/export_inference.sh [THREADS] [SECONDS]   # exports, then runs this script

    export_inference.py MODEL.onnx MODEL.pt MODEL.safetensors THREADS SECONDS MIXT RECIPE

Times, at batch 1 and 32 on 224x224 inputs: ONNX Runtime (CPUExecutionProvider) on mixt's
ONNX file, LibTorch's TorchScript interpreter on mixt's TorchScript file (torch.jit.load: the
runtime torch::jit::load is in C++), PyTorch eager on torchvision's resnet50 with the weights of
mixt's safetensors file, and mixt's own eager forward through `mixt predict RECIPE --image DIR
--batch B`. Each runs for about SECONDS per batch size. One table, each column also as a ratio
to PyTorch eager. Not a test: nothing passes or fails on time.

`mixt predict` is a program, not a function: its rate is the difference of two runs, on B
images and on B * (k + 1), so that starting the process, loading the plugins and the weights
cancel out: rate = B * k / (t2 - t1). The images are 256x256 PNGs, which imagenet_eval only
crops (no resize), so what the difference adds besides the forward passes is decoding and
cropping k * B small PNGs (about a millisecond each, under 1% of a ResNet-50 forward here).
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch
import torchvision
from PIL import Image
from safetensors.torch import load_file


def rate(run, batch, seconds, warmup=2):
    for _ in range(warmup):
        run()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or count < 3:
        run()
        count += 1
    return batch * count / (time.perf_counter() - start)


def predict_seconds(mixt, recipe, weights, folder, batch, threads):
    command = [mixt, "predict", recipe, f"model.weights={weights}", f"trainer.threads={threads}",
               f"data.val={{name: image_folder, root: {folder}, transforms: imagenet_eval}}",
               "--image", folder, "--batch", str(batch), "--top-k", "1"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def mixt_rate(mixt, recipe, weights, batch, threads, expected_rate, seconds, scratch):
    """mixt predict's images/s at `batch`, from runs on B and B * (k + 1) images."""
    k = max(2, round(expected_rate * seconds / batch))
    rng = np.random.default_rng(0)
    times = []
    for images in (batch, batch * (k + 1)):
        folder = os.path.join(scratch, f"b{batch}_{images}")
        os.makedirs(os.path.join(folder, "x"))
        for i in range(images):
            pixels = rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder, "x", f"{i:05d}.png"))
        times.append(predict_seconds(mixt, recipe, weights, folder, batch, threads))
    return batch * k / (times[1] - times[0])


def main():
    onnx_file, ts_file, weights, threads, seconds, mixt, recipe = sys.argv[1:8]
    threads, seconds = int(threads), float(seconds)
    torch.set_num_threads(threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(onnx_file, options, providers=["CPUExecutionProvider"])
    scripted = torch.jit.load(ts_file).eval()
    eager = torchvision.models.resnet50()
    eager.load_state_dict(load_file(weights))
    eager.eval()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for batch in (1, 32):
            x = torch.randn(batch, 3, 224, 224)
            xn = x.numpy()
            with torch.no_grad():
                onnx_rate = rate(lambda: session.run(["output"], {"input": xn}), batch, seconds)
                ts_rate = rate(lambda: scripted(x), batch, seconds)
                eager_rate = rate(lambda: eager(x), batch, seconds)
            mixt_eager = mixt_rate(mixt, recipe, weights, batch, threads, eager_rate, seconds, scratch)
            rows.append((batch, onnx_rate, ts_rate, mixt_eager, eager_rate))
    print(f"ResNet-50 inference, 3x224x224 float32, {threads} threads, images/s (x PyTorch eager), "
          f"about {seconds:g} s per cell")
    print("| batch | ONNX Runtime (mixt's .onnx) | TorchScript (mixt's .pt) | mixt eager (`mixt predict`) "
          "| PyTorch eager (torchvision) |")
    print("|---:|---:|---:|---:|---:|")
    for batch, *rates in rows:
        cells = [f"{r:.1f} ({r / rates[-1]:.2f}x)" for r in rates]
        print(f"| {batch} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
