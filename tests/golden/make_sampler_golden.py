#!/usr/bin/env python3
"""Golden shard orders from torch.utils.data.DistributedSampler (the reference for
mixt's DataLoader): for a dataset of N samples, every rank's indices for a few
(seed, epoch, world_size, shuffle) settings. Writes tests/golden/distributed_sampler.json.

Run: python3 tests/golden/make_sampler_golden.py
"""
import json
import os

import torch
from torch.utils.data import DistributedSampler


def main():
    cases = []
    for n, world, seed, epoch, shuffle in [(103, 4, 5, 2, True), (103, 4, 5, 3, True), (10, 3, 0, 0, False),
                                           (50, 1, 7, 1, True), (7, 8, 1, 0, True)]:
        ranks = []
        for rank in range(world):
            sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed)
            sampler.set_epoch(epoch)
            ranks.append(list(sampler))
        cases.append({"n": n, "world_size": world, "seed": seed, "epoch": epoch, "shuffle": shuffle, "ranks": ranks})
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_sampler.json")
    with open(out, "w") as f:
        json.dump({"generator": "tests/golden/make_sampler_golden.py", "torch": torch.__version__, "cases": cases}, f)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
