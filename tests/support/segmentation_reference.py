#!/usr/bin/env python3
"""A segmentation model's evaluation as torchvision's segmentation reference computes it, on a
mixt TorchScript export, for the C++ test that holds `mixt evaluate` to it
(SegmentationCli, tests/cli/segmentation_cli_test.cpp).

    segmentation_reference.py MODEL.pt DATA.safetensors RESULTS.json

DATA.safetensors holds "images" [N, 3, H, W] float32 and "masks" [N, H, W] int64, as the
dataset serves them. references/segmentation/utils.py's ConfusionMatrix (update: bincount of
n * target + argmax over the pixels with 0 <= target < n; compute: acc_global and iu), the
mean IoU over the classes present in targets or predictions (torch.nanmean), the loss per
counted pixel (F.cross_entropy, ignore_index 255, summed in float64), and how many pixels
have their two best logits within 1e-4 (where float rounding could pick the other class).
The C++ test decides what passes.
"""
import json
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def main():
    model_file, data_file, results = sys.argv[1:4]
    torch.set_num_threads(2)
    module = torch.jit.load(model_file)
    data = load_file(data_file)
    images, masks = data["images"], data["masks"]
    with torch.no_grad():
        logits = torch.cat([module(images[i:i + 50]) for i in range(0, len(images), 50)])
    n = logits.size(1)
    a, b = masks.flatten(), logits.argmax(1).flatten()
    k = (a >= 0) & (a < n)
    confusion = torch.bincount(n * a[k] + b[k], minlength=n ** 2).reshape(n, n)
    h = confusion.double()
    iu = torch.diag(h) / (h.sum(1) + h.sum(0) - torch.diag(h))
    top2 = logits.topk(2, dim=1).values
    out = {
        "samples": int(len(images)),
        "confusion": confusion.tolist(),
        "pixel_accuracy": (torch.diag(h).sum() / h.sum()).item(),
        "iou": [None if v != v else v for v in iu.tolist()],
        "miou": torch.nanmean(iu).item(),
        "loss": (F.cross_entropy(logits.double(), masks, ignore_index=255, reduction="sum") / (masks != 255).sum()).item(),
        "near_ties": int(((top2[:, 0] - top2[:, 1]) < 1e-4).sum()),
    }
    with open(results, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
