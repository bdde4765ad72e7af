#!/usr/bin/env python3
"""Reference logits for `mixt predict --image`, from torch 2.11 / torchvision 0.26 (no downloads).

  make_predict_golden.py golden  IMAGE OUT.json   the logits torchvision's ImageNet eval pipeline
                                                  gives for IMAGE with the weights below
                                                  (committed: tests/golden/predict_image.json,
                                                  for tests/fixtures/data/predict/golden.jpg)
  make_predict_golden.py weights OUT_DIR GOLDEN   the weights: resnet18 (1000 classes), seed 0,
                                                  BN statistics perturbed, as
                                                  OUT_DIR/resnet18.safetensors (46 MB: written at
                                                  test time, not committed); fails when they are
                                                  not the ones the golden was made with
  make_predict_golden.py image   OUT.jpg          writes the test image (a 400x300 JPEG of smooth
                                                  gradients, shapes and noise; committed once)

Two pipelines are recorded, both Resize(256) + CenterCrop(224) + ToTensor + Normalize(ImageNet):
  "pil":    ImageFolder's: PIL decodes (libjpeg-turbo), PIL resizes (bilinear, antialiased),
            as torchvision's reference evaluation and timm's validate.py run it;
  "tensor": torchvision.io.decode_jpeg (libjpeg-turbo) and the transforms on uint8 tensors
            (ATen's antialiased bilinear kernel), which is what mixt's image_folder does.
"""
import hashlib
import json
import sys
from pathlib import Path

if not (len(sys.argv) == 4 and sys.argv[1] == "weights" and (Path(sys.argv[2]) / "resnet18.sha256").exists()
        and (Path(sys.argv[2]) / "resnet18.sha256").read_text().strip()
        == json.loads(Path(sys.argv[3]).read_text())["weights_sha256"]
        and (Path(sys.argv[2]) / "resnet18.safetensors").exists()):
    # Importing torch takes seconds: not when the weights are already there.
    import numpy as np
    import torch
    import torchvision
    from PIL import Image
    from torchvision import transforms as T
    from torchvision.transforms import v2

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from make_model_zoo_golden import save_safetensors  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def model():
    torch.manual_seed(0)
    m = torchvision.models.resnet18().eval()
    with torch.no_grad():
        for p in m.parameters():  # constant parameters (unit BN weights, zero biases) would hide mistakes
            if p.numel() == 1 or bool((p == p.flatten()[0]).all()):
                p.add_(0.1 * torch.randn_like(p))
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
    return m


def state_digest(m):
    h = hashlib.sha256()
    for k, v in m.state_dict().items():
        h.update(k.encode())
        h.update(v.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def pil_input(path):
    pipeline = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])
    with open(path, "rb") as f:
        return pipeline(Image.open(f).convert("RGB"))


def tensor_input(path):
    image = torchvision.io.decode_jpeg(torchvision.io.read_file(str(path)), mode=torchvision.io.ImageReadMode.RGB)
    pipeline = v2.Compose([v2.Resize(256, antialias=True), v2.CenterCrop(224), v2.ToDtype(torch.float32, scale=True),
                           v2.Normalize(MEAN, STD)])
    return pipeline(image)


def golden(image, out):
    m = model()
    pil, tensor = pil_input(image), tensor_input(image)
    with torch.no_grad():
        logits = m(torch.stack([pil, tensor]))
    grey = (pil - tensor) * torch.tensor(STD).view(3, 1, 1) * 255  # the inputs' difference in grey levels
    record = {
        "image": Path(image).name,
        "image_sha256": hashlib.sha256(Path(image).read_bytes()).hexdigest(),
        "weights_sha256": state_digest(m),
        "versions": f"torch {torch.__version__} torchvision {torchvision.__version__}",
        "pil_vs_tensor_input_max_grey_levels": round(float(grey.abs().max()), 3),
        "pil_vs_tensor_logits_relative": float((logits[0] - logits[1]).abs().max() / logits[0].abs().max()),
        "logits_pil": [float(f"{x:.7g}") for x in logits[0].tolist()],
        "logits_tensor": [float(f"{x:.7g}") for x in logits[1].tolist()],
    }
    Path(out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"{out}: input max difference {record['pil_vs_tensor_input_max_grey_levels']} grey levels, "
          f"logits {record['pil_vs_tensor_logits_relative']:.3g} relative")


def weights(out_dir, golden_file):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    expected = json.loads(Path(golden_file).read_text())["weights_sha256"]
    target = out_dir / "resnet18.safetensors"
    stamp = out_dir / "resnet18.sha256"
    if target.exists() and stamp.exists() and stamp.read_text().strip() == expected:
        print(f"{target}: up to date")
        return
    m = model()
    digest = state_digest(m)
    if digest != expected:
        sys.exit(f"these weights ({digest}) are not those of {golden_file} ({expected}): torch's initialisation "
                 "changed; regenerate the golden with `make_predict_golden.py golden`")
    save_safetensors(target, {k: v.clone() for k, v in m.state_dict().items()})
    stamp.write_text(digest + "\n")


def image(out):
    rng = np.random.default_rng(31)
    h, w = 300, 400
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    pixels = np.stack([255 * x / w, 255 * y / h, 128 + 100 * np.sin(x / 17.0) * np.cos(y / 23.0)], axis=-1)
    pixels[60:140, 80:200] = [230, 40, 30]  # a red box and a dark disc: edges the resize must treat the same
    pixels[((x - 290) ** 2 + (y - 190) ** 2) < 60 ** 2] = [20, 30, 60]
    pixels += rng.normal(0, 12, pixels.shape)
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(out, quality=90)  # 4:2:0, as most photos


if __name__ == "__main__":
    if "torch" in globals():
        torch.set_num_threads(2)
    if len(sys.argv) == 4 and sys.argv[1] == "golden":
        golden(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "weights":
        weights(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "image":
        image(sys.argv[2])
    else:
        sys.exit(__doc__)
