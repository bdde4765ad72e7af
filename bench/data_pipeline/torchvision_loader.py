#!/usr/bin/env python3
"""The reference: torchvision ImageFolder (PIL decoding) + torch.utils.data.DataLoader,
the standard ImageNet training pipeline, one epoch. Prints one JSON line.

usage: torchvision_loader.py ROOT [--batch-size 256] [--workers 2]
"""
import argparse
import json
import resource
import time

import torch
from torchvision import datasets, transforms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    train = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    torch.manual_seed(0)
    start = time.perf_counter()
    dataset = datasets.ImageFolder(args.root, transform=train)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers)
    images = 0
    for inputs, targets in loader:
        images += inputs.shape[0]
    del loader  # joins the worker processes, so their CPU time is counted below
    seconds = time.perf_counter() - start
    cpu = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
    print(json.dumps({"loader": "torchvision", "images": images, "seconds": seconds,
                      "images_per_second": images / seconds, "cpu_seconds": cpu}))


if __name__ == "__main__":
    main()
