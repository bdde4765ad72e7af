#!/usr/bin/env python3
"""The plain-PyTorch side of bench/memory/activation_checkpointing.sh.

torchvision resnet50 or vit_b_16 trained on one synthetic batch kept on the device (SGD,
momentum 0.875, label smoothing 0.1, as recipes/resnet50), each setting in a fresh
subprocess (a clean process peak):

  none  every activation kept (PyTorch eager)
  all   torch.utils.checkpoint (use_reentrant=False, the variant PyTorch recommends) on the
        blocks mixt's `activation_checkpointing: all` recomputes: every Bottleneck of
        layer1..layer4, every encoder layer of ViT

Prints one JSON object per setting with the fields of `mixt bench`'s bench.json.
"""
import argparse
import json
import math
import resource
import subprocess
import sys
import time


class Checkpointed:
    """Wraps a module's forward in torch.utils.checkpoint."""

    def __init__(self, module):
        import torch.utils.checkpoint
        self.module = module
        self.forward = module.forward
        module.forward = lambda *a: torch.utils.checkpoint.checkpoint(self.forward, *a, use_reentrant=False)


def build(args):
    import torchvision
    if args.model == "resnet50":
        model = torchvision.models.resnet50(num_classes=1000)
        blocks = [b for layer in (model.layer1, model.layer2, model.layer3, model.layer4) for b in layer]
    else:
        model = torchvision.models.vit_b_16(num_classes=1000)
        blocks = list(model.encoder.layers)
    if args.checkpointing == "all":
        for block in blocks:
            Checkpointed(block)
    return model


def run_one(args):
    import torch
    torch.manual_seed(0)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model = build(args).to(device)
    channels_last = args.model == "resnet50"
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.256 * args.batch / 256, momentum=0.875,
                                weight_decay=3.0517578125e-05)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(args.batch, 3, 224, 224, generator=generator).to(device)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (args.batch,), generator=generator).to(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, loss = [], None
    for _ in range(args.warmup + args.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1000.0)
    if device.type == "cuda":
        peak, kind = torch.cuda.max_memory_allocated(device) / 2**20, "CUDA caching-allocator peak"
    else:
        peak, kind = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, "process peak RSS"
    timed = sorted(times[args.warmup:])
    p50 = timed[(len(timed) - 1) // 2] if len(timed) % 2 else (timed[len(timed) // 2 - 1] + timed[len(timed) // 2]) / 2
    print(json.dumps({"model": args.model, "activation_checkpointing": args.checkpointing, "device": str(device),
                      "batch": args.batch, "steps": args.steps, "step_ms_p50": p50,
                      "images_per_s": 1000.0 * args.batch * len(timed) / sum(timed), "peak_memory_mib": peak,
                      "memory_kind": kind, "loss": float(loss), "loss_finite": math.isfinite(float(loss)),
                      "torch": torch.__version__}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["resnet50", "vit_b_16"], default="resnet50")
    parser.add_argument("--checkpointing", default="none,all")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args)
        return
    for setting in args.checkpointing.split(","):
        command = [sys.executable, __file__, "--one", "--model", args.model, "--checkpointing", setting,
                   "--device", args.device, "--batch", str(args.batch), "--steps", str(args.steps),
                   "--warmup", str(args.warmup), "--threads", str(args.threads)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            print(json.dumps({"model": args.model, "activation_checkpointing": setting,
                              "error": (result.stderr.strip().splitlines() or ["failed"])[-1]}))
        else:
            print(result.stdout.strip().splitlines()[-1])
        sys.stdout.flush()


if __name__ == "__main__":
    main()
