#!/usr/bin/env python3
"""Golden segmentation losses and figures for tests/plugins/tasks/segmentation_test.cpp, from
PyTorch, as torchvision's segmentation reference computes them (references/segmentation):

- the training loss: F.cross_entropy(logits, targets, ignore_index=255) (mean over the pixels
  not ignored), with and without label smoothing;
- an evaluation of two batches: utils.ConfusionMatrix's update (k = (a >= 0) & (a < n);
  bincount(n * a[k] + b[k], minlength=n**2), argmax over classes as the prediction) and
  compute (acc_global = diag.sum() / h.sum(); iu = diag / (h.sum(1) + h.sum(0) - diag)),
  the loss per counted pixel, and the mean IoU over the classes present in the targets or
  the predictions (torch.nanmean; torchvision's iu.mean() would be NaN when a class is in
  neither, as class 4 is here).
Regenerate with
    python3 tests/golden/make_segmentation_golden.py > tests/golden/segmentation.json
"""
import json

import torch
import torch.nn.functional as F

CLASSES, IGNORE = 5, 255
g = torch.Generator().manual_seed(7)
batches = []
confusion = torch.zeros(CLASSES, CLASSES, dtype=torch.int64)
loss_sum, pixels = 0.0, 0
for batch, height, width in [(2, 4, 5), (1, 4, 5)]:
    logits = torch.randn(batch, CLASSES, height, width, generator=g)
    logits[:, 4] -= 100.0  # class 4: never predicted, and never a target below
    targets = torch.randint(0, CLASSES - 1, (batch, height, width), generator=g)
    targets[torch.rand(batch, height, width, generator=g) < 0.2] = IGNORE
    batches.append({
        "logits": logits.tolist(),
        "targets": targets.tolist(),
        "loss": F.cross_entropy(logits, targets, ignore_index=IGNORE).item(),
        "loss_smoothed_0.1": F.cross_entropy(logits, targets, ignore_index=IGNORE, label_smoothing=0.1).item(),
    })
    a, b = targets.flatten(), logits.argmax(1).flatten()
    k = (a >= 0) & (a < CLASSES)
    confusion += torch.bincount(CLASSES * a[k] + b[k], minlength=CLASSES ** 2).reshape(CLASSES, CLASSES)
    loss_sum += F.cross_entropy(logits.double(), targets, ignore_index=IGNORE, reduction="sum").item()
    pixels += int((targets != IGNORE).sum())

h = confusion.double()
iu = torch.diag(h) / (h.sum(1) + h.sum(0) - torch.diag(h))
print(json.dumps({
    "torch": torch.__version__,
    "classes": CLASSES,
    "batches": batches,
    "confusion": confusion.tolist(),
    "evaluation_loss": loss_sum / pixels,
    "pixel_accuracy": (torch.diag(h).sum() / h.sum()).item(),
    "iou": [None if v != v else v for v in iu.tolist()],
    "miou": torch.nanmean(iu).item(),
}))
