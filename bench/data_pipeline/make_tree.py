#!/usr/bin/env python3
"""Writes an ImageNet-style tree for the input-pipeline benchmark: OUT/<class>/<n>.JPEG,
CLASSES classes x PER_CLASS images of about 400x350 (each side drawn in +-15%), JPEG
quality 90. The pictures are smooth colour fields with edges and fine texture, so their
JPEG size and decode cost look like photographs' (~30-60 KB), not like flat colour.
Deterministic (seeded); does nothing when OUT already holds the full tree.

usage: make_tree.py OUT [--classes 100] [--per-class 50]
"""
import argparse
import os

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def picture(rng):
    w = int(400 * rng.uniform(0.85, 1.15))
    h = int(350 * rng.uniform(0.85, 1.15))
    # Low-frequency colour field, upsampled: the "scene".
    coarse = rng.integers(0, 256, size=(rng.integers(3, 9), rng.integers(3, 9), 3), dtype=np.uint8)
    img = Image.fromarray(coarse).resize((w, h), Image.BICUBIC)
    # A few objects with hard edges.
    draw = ImageDraw.Draw(img)
    for _ in range(rng.integers(3, 10)):
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        x1, y1 = x0 + rng.integers(20, 200), y0 + rng.integers(20, 200)
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=colour)
    img = img.filter(ImageFilter.GaussianBlur(1.0))
    # Sensor-like noise: the fine texture that makes JPEGs of photos large.
    noisy = np.asarray(img, dtype=np.int16) + rng.normal(0, 10, size=(h, w, 1)).astype(np.int16)
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--per-class", type=int, default=50)
    args = parser.parse_args()
    done = os.path.join(args.out, ".complete")
    if os.path.exists(done):
        return
    rng = np.random.default_rng(0)
    total = 0
    for c in range(args.classes):
        folder = os.path.join(args.out, f"n{c:08d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(args.per_class):
            picture(rng).save(os.path.join(folder, f"{i:04d}.JPEG"), quality=90)
            total += 1
    open(done, "w").close()
    print(f"wrote {total} images to {args.out}")


if __name__ == "__main__":
    main()
