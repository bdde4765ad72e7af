#!/usr/bin/env python3
"""Plain PyTorch twin of recipes/fashion_mnist.yaml, for bench/fashion_mnist_vs_pytorch.sh.

Same data (the IDX files, normalised the same way, reshuffled per epoch), same network as
models/simple_cnn (channels [32, 64], hidden 128), same optimizer (AdamW lr 1e-3,
weight decay 1e-4), same batch, same intra-op thread count. Times `--steps` optimizer
steps after `--warmup` untimed ones and prints one JSON line.
"""
import argparse
import gzip
import json
import time

import numpy as np
import torch
from torch import nn

ROOT = "/usr/share/datasets/fashion-mnist"


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    images = torch.from_numpy(read_idx(f"{ROOT}/train-images-idx3-ubyte.gz", 16).copy()).view(-1, 1, 28, 28)
    labels = torch.from_numpy(read_idx(f"{ROOT}/train-labels-idx1-ubyte.gz", 8).copy()).long()
    model = nn.Sequential()
    model.features = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    model.flatten = nn.Flatten()
    model.classifier = nn.Sequential(nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.0), nn.Linear(128, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()

    generator = torch.Generator().manual_seed(0)
    order = torch.randperm(images.shape[0], generator=generator)
    position = 0

    def step():
        nonlocal position, order
        if position + args.batch > order.numel():
            order = torch.randperm(images.shape[0], generator=generator)
            position = 0
        picked = order[position:position + args.batch]
        position += args.batch
        x = images.index_select(0, picked).float().div_(255).sub_(0.2860).div_(0.3530)
        y = labels.index_select(0, picked)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(args.warmup):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    loss = float(loss.detach())
    seconds = time.perf_counter() - start
    print(json.dumps({"steps": args.steps, "batch": args.batch, "threads": args.threads,
                      "seconds": seconds, "samples_per_s": args.steps * args.batch / seconds,
                      "torch": torch.__version__, "last_loss": loss}))


if __name__ == "__main__":
    main()
