#!/usr/bin/env python3
"""Golden class names, as torchvision names them: FashionMNIST.classes (a class
attribute: no data needed) and CIFAR10's batches.meta.txt order (torchvision reads it from
the dataset's meta file; the published list is written here). Writes
tests/golden/class_names.json.

Run: python3 tests/golden/make_class_names_golden.py
"""
import json
import os

import torchvision


def main():
    golden = {
        "fashion_mnist": list(torchvision.datasets.FashionMNIST.classes),
        # https://www.cs.toronto.edu/~kriz/cifar.html, batches.meta.txt, label order
        "cifar10": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"],
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "class_names.json")
    with open(out, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
