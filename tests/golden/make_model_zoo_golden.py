#!/usr/bin/env python3
"""Reference data for the model zoo, from torchvision 0.26 / torch 2.11 (no downloads).

  make_model_zoo_golden.py names  OUT.json   every zoo model's parameter count, torchvision's
                                             published GFLOPs (weights meta "_ops") and the
                                             name and shape of every state_dict entry
                                             (committed: tests/golden/model_zoo.json)
  make_model_zoo_golden.py parity OUT_DIR    per family, random weights (fixed seed) as
                                             safetensors and the input/logits/BN statistics
                                             mixt must reproduce (generated at test time into
                                             the build directory: too large for git; once per
                                             generator and torch/torchvision version, which
                                             OUT_DIR/stamp records)

Safetensors are written by hand (8-byte header length, JSON header, raw little-endian
bytes) so that the reference needs only torch and torchvision.
"""
import hashlib
import json
import struct
import sys
from pathlib import Path

import torch
import torchvision
from torchvision.models import get_model, get_model_weights
from torchvision.models.vision_transformer import VisionTransformer

MODELS = [
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
    "wide_resnet50_2", "wide_resnet101_2",
    "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small",
    "vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn",
    "convnext_tiny", "convnext_small",
    "vit_b_16", "vit_b_32",
    "efficientnet_b0",
    "lraspp_mobilenet_v3_large", "fcn_resnet50", "deeplabv3_resnet50",
]
# Segmentation models take a backbone's ImageNet weights by default: none here (no downloads).
SEGMENTATION = {"lraspp_mobilenet_v3_large", "fcn_resnet50", "deeplabv3_resnet50"}
# Their published weights carry the auxiliary head, and so does mixt's default.
AUX = {"fcn_resnet50", "deeplabv3_resnet50"}


def build(name, **options):
    if name in SEGMENTATION:
        options["weights_backbone"] = None
    return get_model(name, **options)

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.float16: "F16",
          torch.bfloat16: "BF16", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}


def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        shape = list(t.shape)
        t = t.detach().contiguous().cpu().reshape(-1)  # 0-d tensors cannot be viewed as bytes
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": DTYPES[t.dtype], "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def names(out):
    zoo = {}
    for name in MODELS:
        model = build(name, aux_loss=True) if name in AUX else build(name)
        meta = get_model_weights(name).DEFAULT.meta
        params = sum(p.numel() for p in model.parameters())
        assert params == meta["num_params"], name
        zoo[name] = {"num_params": params, "gflops": meta["_ops"],
                     "state": [[k, list(v.shape)] for k, v in model.state_dict().items()]}
    Path(out).write_text(json.dumps(zoo, separators=(",", ":")) + "\n")


# One case per family: (case, torchvision constructor, mixt model section, input shape).
# Inputs are as small as the architecture allows (2 CPU cores run this in CI). ViT's
# weights at full size are 330 MB, so its case uses torchvision's VisionTransformer class
# at a small size, which mixt's vit plugin builds from the same options.
def cases():
    return [
        ("resnet18", lambda: get_model("resnet18", num_classes=10), {"name": "resnet18", "num_classes": 10}, [2, 3, 64, 64]),
        ("resnet50", lambda: get_model("resnet50"), {"name": "resnet50"}, [1, 3, 64, 64]),
        ("resnext50_32x4d", lambda: get_model("resnext50_32x4d", num_classes=10),
         {"name": "resnext50_32x4d", "num_classes": 10}, [2, 3, 32, 32]),
        ("mobilenet_v2", lambda: get_model("mobilenet_v2", num_classes=10), {"name": "mobilenet_v2", "num_classes": 10}, [2, 3, 64, 64]),
        ("mobilenet_v3_large", lambda: get_model("mobilenet_v3_large", num_classes=10),
         {"name": "mobilenet_v3_large", "num_classes": 10}, [2, 3, 64, 64]),
        ("mobilenet_v3_small", lambda: get_model("mobilenet_v3_small", num_classes=10),
         {"name": "mobilenet_v3_small", "num_classes": 10}, [2, 3, 64, 64]),
        ("vgg11_bn", lambda: get_model("vgg11_bn", num_classes=10), {"name": "vgg11_bn", "num_classes": 10}, [1, 3, 32, 32]),
        ("efficientnet_b0", lambda: get_model("efficientnet_b0", num_classes=10),
         {"name": "efficientnet_b0", "num_classes": 10}, [2, 3, 64, 64]),
        ("convnext_tiny", lambda: get_model("convnext_tiny", num_classes=10), {"name": "convnext_tiny", "num_classes": 10}, [1, 3, 64, 64]),
        ("lraspp_mobilenet_v3_large", lambda: build("lraspp_mobilenet_v3_large", num_classes=4),
         {"name": "lraspp_mobilenet_v3_large", "num_classes": 4}, [2, 3, 64, 64]),
        ("fcn_resnet50", lambda: build("fcn_resnet50", num_classes=4, aux_loss=False),
         {"name": "fcn_resnet50", "num_classes": 4, "aux_classifier": False}, [2, 3, 64, 64]),
        ("deeplabv3_resnet50", lambda: build("deeplabv3_resnet50", num_classes=4, aux_loss=False),
         {"name": "deeplabv3_resnet50", "num_classes": 4, "aux_classifier": False}, [2, 3, 64, 64]),
        ("vit_small", lambda: VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                                                mlp_dim=128, num_classes=10),
         {"name": "vit_b_16", "image_size": 32, "patch_size": 8, "num_layers": 2, "num_heads": 4, "hidden_dim": 64,
          "mlp_dim": 128, "num_classes": 10}, [2, 3, 32, 32]),
    ]


def parity_stamp():
    """What the parity files depend on: this generator and the reference versions."""
    script = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return f"{script} torch {torch.__version__} torchvision {torchvision.__version__}\n"


def parity(out_dir, only=None):
    out_dir = Path(out_dir)
    stamp = out_dir / "stamp"
    # ~800 MB and ~50 s to write: a test run reuses the files while nothing they depend on changed.
    if not only and stamp.exists() and stamp.read_text() == parity_stamp():
        print(f"{out_dir}: up to date")
        return
    stamp.unlink(missing_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    index = {}
    for case, make, section, shape in cases():
        if only and case not in only:
            continue
        torch.manual_seed(0)
        model = make().eval()
        with torch.no_grad():
            # Parameters initialised to a constant (zero heads, unit norms, ConvNeXt's 1e-6
            # layer scale) would hide mistakes: perturb them.
            for p in model.parameters():
                if p.numel() == 1 or bool((p == p.flatten()[0]).all()):
                    p.add_(0.1 * torch.randn_like(p))
            # Random, not-too-trivial BN statistics so eval mode exercises them.
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.1, 0.1)
                    m.running_var.uniform_(0.5, 1.5)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        save_safetensors(out_dir / f"{case}.weights.safetensors", state)
        x = torch.randn(shape)
        with torch.no_grad():
            logits = model(x)
            if isinstance(logits, dict):  # a segmentation model's {"out": logits}
                logits = logits["out"]
            model.train()
            torch.manual_seed(1)  # the same seed in mixt: dropout/stochastic depth draw the same masks
            model(x)
        io = {"input": x, "logits": logits}
        for k, v in model.state_dict().items():
            if k.endswith(("running_mean", "running_var", "num_batches_tracked")):
                io["train." + k] = v
        save_safetensors(out_dir / f"{case}.io.safetensors", io)
        index[case] = section
    (out_dir / "cases.json").write_text(json.dumps(index, indent=1) + "\n")
    if not only:
        stamp.write_text(parity_stamp())


if __name__ == "__main__":
    torch.set_num_threads(2)
    if sys.argv[1] == "names":
        names(sys.argv[2])
    elif sys.argv[1] == "parity":
        parity(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
