#!/usr/bin/env python3
"""Golden top-1/top-k counts for tests/train/accuracy_test.cpp, from torchvision's reference.

`accuracy` below is torchvision's references/classification/utils.py `accuracy` (the
function its ImageNet recipes report Acc@1 and Acc@5 with), copied verbatim but for
returning counts rather than percentages: the reference scripts are not part of the
torchvision package. Logits include exact ties (values on a coarse grid), where the
order topk gives decides what counts. Regenerate with
    python3 tests/golden/make_top_k_golden.py > tests/golden/top_k_accuracy.json
"""
import json

import torch


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.inference_mode():
        maxk = max(topk)
        batch_size = target.size(0)
        if target.ndim == 2:
            target = target.max(dim=1)[1]

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target[None])

        res = []
        for k in topk:
            correct_k = correct[:k].flatten().sum(dtype=torch.float32)
            res.append(int(correct_k.item()))  # torchvision: correct_k * (100.0 / batch_size)
        return res


def case(name, logits, labels, k):
    top1, topk = accuracy(logits, labels, topk=(1, k))
    return {"name": name, "k": k, "logits": logits.tolist(), "labels": labels.tolist(), "top1": top1, "topk": topk}


def main():
    g = torch.Generator().manual_seed(0)
    cases = []
    ten = torch.randn(200, 10, generator=g)
    cases.append(case("10 classes", ten, torch.randint(0, 10, (200,), generator=g), 5))
    ties = torch.randint(0, 4, (300, 12), generator=g).float() / 2  # many equal logits per row
    cases.append(case("12 classes with ties", ties, torch.randint(0, 12, (300,), generator=g), 5))
    three = torch.randn(64, 3, generator=g)
    cases.append(case("3 classes: top-3", three, torch.randint(0, 3, (64,), generator=g), 3))
    print(json.dumps({"torch": torch.__version__, "cases": cases}))


if __name__ == "__main__":
    main()
