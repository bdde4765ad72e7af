#!/usr/bin/env python3
"""Mean average precision of a multi-label model over the Fashion-MNIST test set, for the C++
test that holds examples/multi_label_task's evaluation to it
(TaskExample, tests/examples/task_example_test.cpp).

    multi_label_reference.py MODEL.pt ROOT ATTRIBUTES.json RESULTS.json

MODEL.pt is `mixt export`'s TorchScript file of the trained model; each image is
preprocessed as its metadata says (mixt.json's mixt.preprocessing "described"), with the
ATen ops mixt's fashion_mnist dataset uses. ATTRIBUTES.json lists, per attribute, the
classes that have it. Average precision is sklearn.metrics.average_precision_score's
definition, written out in numpy: over the distinct scores from the highest down, the
precision at each weighted by the recall it adds. RESULTS.json holds it per attribute and its
mean, computed on the exact scores and on the scores rounded down to a multiple of 1/1000 (the
example's bins), and how many scores lie within 1e-6 of a bin edge (where float rounding
could move one across). The C++ test decides what passes.
"""
import gzip
import json
import os
import re
import sys

import numpy as np
import torch

BINS = 1000


def read_idx(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def average_precision(scores, positive):
    order = np.argsort(-scores, kind="stable")
    scores, positive = scores[order], positive[order]
    distinct = np.r_[np.nonzero(np.diff(scores))[0], len(scores) - 1]  # last index of each score
    true_positives = np.cumsum(positive)[distinct]
    false_positives = (distinct + 1) - true_positives
    precision = true_positives / (true_positives + false_positives)
    recall = true_positives / positive.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def main():
    model_file, root, attributes_file, results = sys.argv[1:5]
    extra = {"mixt.json": ""}
    torch.set_num_threads(2)
    module = torch.jit.load(model_file, _extra_files=extra)
    metadata = json.loads(extra["mixt.json"])
    described = metadata["mixt.preprocessing"]["described"]
    mean, std = re.search(r"normalize\(mean=([-0-9.e]+), std=([-0-9.e]+)\)", described).groups()
    images = read_idx(os.path.join(root, "t10k-images-idx3-ubyte.gz"), 16).reshape(-1, 1, 28, 28)
    labels = read_idx(os.path.join(root, "t10k-labels-idx1-ubyte.gz"), 8).astype(np.int64)
    x = torch.from_numpy(images.copy()).to(torch.float32).div_(255.0).sub_(float(mean)).div_(float(std))
    with torch.no_grad():
        logits = torch.cat([module(x[i:i + 1000]) for i in range(0, len(x), 1000)])
    scores = logits.sigmoid()  # float32, as the example's evaluation computes it
    binned = (scores * BINS).floor().clamp(0, BINS - 1).numpy() / BINS
    exact = scores.numpy().astype(np.float64)
    with open(attributes_file) as f:
        attributes = json.load(f)
    ap_exact, ap_binned = [], []
    for a, classes in enumerate(attributes):
        positive = np.isin(labels, classes).astype(np.float64)
        ap_exact.append(average_precision(exact[:, a], positive))
        ap_binned.append(average_precision(binned[:, a], positive))
    scaled = exact * BINS
    out = {"samples": int(len(labels)), "ap_exact": ap_exact, "ap_binned": ap_binned,
           "map_exact": float(np.mean(ap_exact)), "map_binned": float(np.mean(ap_binned)),
           "near_bin_edges": int((np.abs(scaled - np.round(scaled)) < 1e-6 * BINS).sum())}
    with open(results, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
