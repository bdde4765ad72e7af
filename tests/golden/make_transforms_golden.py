#!/usr/bin/env python3
"""Golden values for mixt's image transforms, from torchvision 0.26 (the reference).

Writes tests/golden/transforms.json:
  eval_pipeline: three small RGB images (uint8, H x W x 3) and what
      Resize(32) -> CenterCrop(28) -> ToTensor -> Normalize(ImageNet mean/std)
    makes of them, through torchvision's two paths: PIL images (the classic ImageFolder
    path) and uint8 tensors (transforms.v2, antialias=True, the kernel mixt uses).
  color_jitter: one image and torchvision's adjust_brightness / adjust_contrast /
    adjust_saturation of it (uint8 tensors, transforms.v2) at fixed factors.
  random_resized_crop: statistics of RandomResizedCrop.get_params (scale (0.08, 1),
    ratio (3/4, 4/3)) over many draws, for a normal and an extreme image shape.

Run: python3 tests/golden/make_transforms_golden.py  (deterministic; seeds fixed)
"""
import json
import math
import os

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import v2

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def make_image(h, w, seed):
    """Smooth colour gradients plus texture: enough structure for resizing to matter."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    channels = []
    for c in range(3):
        fx, fy, phase = rng.uniform(0.05, 0.4), rng.uniform(0.05, 0.4), rng.uniform(0, 6.28)
        wave = 127.5 + 90 * np.sin(fx * x + fy * y + phase) + 30 * np.cos(0.7 * fx * y - 1.3 * fy * x)
        channels.append(wave + rng.normal(0, 8, size=(h, w)))
    return np.clip(np.stack(channels, axis=2), 0, 255).round().astype(np.uint8)


def eval_pipeline():
    pil = T.Compose([T.Resize(32), T.CenterCrop(28), T.ToTensor(), T.Normalize(MEAN, STD)])
    tensor = v2.Compose([v2.Resize(32, antialias=True), v2.CenterCrop(28), v2.ToDtype(torch.float32, scale=True),
                         v2.Normalize(MEAN, STD)])
    cases = []
    for i, (h, w) in enumerate([(48, 64), (70, 50), (41, 41)]):
        image = make_image(h, w, seed=i)
        from_pil = pil(Image.fromarray(image))
        from_tensor = tensor(torch.from_numpy(image).permute(2, 0, 1).contiguous())
        cases.append({
            "height": h, "width": w,
            "pixels": image.reshape(-1).tolist(),
            "pil": [round(v, 6) for v in from_pil.reshape(-1).tolist()],
            "tensor": [round(v, 6) for v in from_tensor.reshape(-1).tolist()],
        })
    return cases


def color_jitter():
    from torchvision.transforms.v2 import functional as F
    image = make_image(20, 24, seed=5)
    chw = torch.from_numpy(image).permute(2, 0, 1).contiguous()
    out = {"height": 20, "width": 24, "pixels": image.reshape(-1).tolist()}
    for name, adjust, factor in [("brightness", F.adjust_brightness, 1.3), ("contrast", F.adjust_contrast, 0.6),
                                 ("saturation", F.adjust_saturation, 1.7)]:
        out[name] = {"factor": factor, "hwc": adjust(chw, factor).permute(1, 2, 0).reshape(-1).tolist()}
    return out


def crop_statistics(h, w, draws=20000):
    torch.manual_seed(0)
    image = torch.zeros(3, h, w)
    scale, ratio = (0.08, 1.0), (3 / 4, 4 / 3)
    areas, log_ratios = [], []
    for _ in range(draws):
        top, left, ch, cw = T.RandomResizedCrop.get_params(image, scale, ratio)
        assert 0 <= top and top + ch <= h and 0 <= left and left + cw <= w
        areas.append(ch * cw / (h * w))
        log_ratios.append(math.log(cw / ch))
    a, r = np.array(areas), np.array(log_ratios)
    return {"height": h, "width": w, "draws": draws,
            "area_mean": float(a.mean()), "area_std": float(a.std()),
            "area_min": float(a.min()), "area_max": float(a.max()),
            "log_ratio_mean": float(r.mean()), "log_ratio_std": float(r.std()),
            "log_ratio_min": float(r.min()), "log_ratio_max": float(r.max())}


def main():
    golden = {
        "generator": "tests/golden/make_transforms_golden.py",
        "torch": torch.__version__, "torchvision": __import__("torchvision").__version__,
        "mean": MEAN, "std": STD,
        "eval_pipeline": eval_pipeline(),
        "color_jitter": color_jitter(),
        "random_resized_crop": [crop_statistics(350, 400), crop_statistics(40, 400)],
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transforms.json")
    with open(out, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
    print(f"wrote {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
