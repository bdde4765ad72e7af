#!/usr/bin/env python3
"""Top-1 of mixt export's files over the Fashion-MNIST test set, for the C++ test that holds
them to `mixt evaluate` (ExportFashionMnist, tests/cli/export_fashion_mnist_test.cpp).

    fashion_mnist_onnx_reference.py MODEL.onnx MODEL.pt ROOT RESULTS.json

ROOT holds the IDX .gz files (the Debian package dataset-fashion-mnist installs them in
/usr/share/datasets/fashion-mnist). Each image is preprocessed as the ONNX file's metadata
says (mixt.preprocessing's "described": "28x28 grey, pixel values / 255 -> normalize(mean=M,
std=S)"), as a deployer would, with the ATen ops mixt's fashion_mnist dataset uses on float32
(x / 255, then (x - M) / S): the same results as `mixt evaluate` then show the metadata is
right. ONNX Runtime (CPUExecutionProvider) and
torch.jit.load each score all 10,000 images; RESULTS.json holds, per runtime, the correct count
overall and per class, and how many images have their two best logits within 1e-4 (where a
float rounding could pick the other class). The C++ test decides what passes.
"""
import gzip
import json
import os
import re
import sys

import onnx

import numpy as np
import onnxruntime as ort
import torch


def read_idx(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def score(logits, labels):
    predicted = logits.argmax(1)
    top2 = np.sort(logits, 1)[:, -2:]
    return {
        "correct": int((predicted == labels).sum()),
        "per_class_correct": [int(((predicted == labels) & (labels == c)).sum()) for c in range(10)],
        "near_ties": int((top2[:, 1] - top2[:, 0] < 1e-4).sum()),
    }


def main():
    onnx_file, ts_file, root, results = sys.argv[1:5]
    metadata = {p.key: p.value for p in onnx.load(onnx_file, load_external_data=False).metadata_props}
    described = json.loads(metadata["mixt.preprocessing"])["described"]
    normalize = re.search(r"normalize\(mean=([-0-9.e]+), std=([-0-9.e]+)\)", described)
    mean, std = normalize.groups()
    images = read_idx(os.path.join(root, "t10k-images-idx3-ubyte.gz"), 16).reshape(-1, 1, 28, 28)
    labels = read_idx(os.path.join(root, "t10k-labels-idx1-ubyte.gz"), 8).astype(np.int64)
    # datasets/fashion_mnist: to(float), div_(255), sub_(mean), div_(std), as the same ATen ops.
    x = torch.from_numpy(images.copy()).to(torch.float32).div_(255.0).sub_(float(mean)).div_(float(std)).numpy()

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(onnx_file, options, providers=["CPUExecutionProvider"])
    onnx_logits = np.concatenate([session.run(["output"], {"input": x[i:i + 1000]})[0] for i in range(0, len(x), 1000)])

    torch.set_num_threads(2)
    module = torch.jit.load(ts_file)
    with torch.no_grad():
        ts_logits = np.concatenate([module(torch.from_numpy(x[i:i + 1000])).numpy() for i in range(0, len(x), 1000)])

    out = {"samples": int(len(labels)), "onnxruntime": score(onnx_logits, labels),
           "torchscript": score(ts_logits, labels), "described": described, "mean": float(mean), "std": float(std)}
    with open(results, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
