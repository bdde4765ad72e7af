#!/usr/bin/env python3
"""The masks `mixt predict --image` should draw for a segmentation model, from its TorchScript
export, for the C++ test that holds the PNGs to them (SegmentationFolderCli,
tests/cli/segmentation_folder_cli_test.cpp).

    predict_mask_reference.py MODEL.pt SIZE RESULTS.json IMAGE MASK [IMAGE MASK ...]

Each IMAGE goes through the segmentation_folder dataset's evaluation preprocessing written
with torchvision (PIL decode; the shorter side resized to SIZE as torchvision's F.resize on a
uint8 tensor does, bilinear with antialiasing; F.center_crop to SIZE; scale to [0, 1]; ImageNet normalize), then the
model; its arg-max is compared with MASK as PIL reads it (a palette PNG's indices). Per
image: the PNG's mode, whether its palette is VOC's, pixels, pixels whose index differs
from the arg-max, pixels whose two best logits are within 1e-4 (where float rounding could
pick the other class), and how many classes the arg-max holds. The C++ test decides what passes.
"""
import json
import sys

import numpy as np
import torch
import torchvision.transforms.functional as F
from PIL import Image


def voc_palette():
    palette = []
    for i in range(256):
        r = g = b = 0
        c = i
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        palette += [r, g, b]
    return palette


def main():
    model_file, size, results = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pairs = sys.argv[4:]
    torch.set_num_threads(2)
    module = torch.jit.load(model_file)
    out = []
    for image_file, mask_file in zip(pairs[0::2], pairs[1::2]):
        image = torch.from_numpy(np.array(Image.open(image_file).convert("RGB"))).permute(2, 0, 1)
        h, w = image.shape[1:]
        # torchvision's F.resize(size) output size; its uint8 kernel in the channels_last layout.
        shape = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
        image = image.unsqueeze(0).contiguous(memory_format=torch.channels_last)
        image = torch.nn.functional.interpolate(image, shape, mode="bilinear", antialias=True, align_corners=False)
        image = F.center_crop(image[0].contiguous(), size)
        image = F.normalize(image.float() / 255, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
        with torch.no_grad():
            logits = module(image.unsqueeze(0))[0]
        mask = Image.open(mask_file)
        indices = torch.from_numpy(np.array(mask).astype(np.int64))
        top2 = logits.topk(2, dim=0).values
        out.append({
            "mode": mask.mode,
            "voc_palette": mask.getpalette() == voc_palette(),
            "pixels": int(indices.numel()),
            "differing": int((indices != logits.argmax(0)).sum()) if indices.shape == logits.shape[1:] else -1,
            "near_ties": int(((top2[0] - top2[1]) < 1e-4).sum()),
            "classes_predicted": int(logits.argmax(0).unique().numel()),
        })
    with open(results, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
