#!/usr/bin/env python3
"""The plain-PyTorch side of bench/resnet50_compare.sh.

torchvision resnet50 trained on synthetic data (one random batch generated once and kept
on the device, as NVIDIA's ResNet-50 benchmarks do), NVIDIA's v1.5 recipe settings (SGD
momentum 0.875, lr 0.256 per 256 images, weight decay 3.0517578125e-05 not applied to
batch-norm and bias, label smoothing 0.1), for each precision policy:

  fp32      TF32 off for cuBLAS and cuDNN
  tf32      TF32 on for matmul and convolution
  amp_fp16  torch.autocast(float16) + torch.amp.GradScaler (default settings)
  amp_bf16  torch.autocast(bfloat16), no scaler

Each policy runs in a fresh subprocess (clean allocator peak and process memory). Prints
one JSON object per policy with the same fields as `mixt bench`'s bench.json.

--fused with amp_fp16: torch 2.11's fused SGD takes GradScaler's _step_supports_amp_scaling
path, which leaves the momentum buffers uninitialised when the first step is skipped
(tests/golden/torch_fused_sgd_skip.py); the row then carries a note, as its loss is not
that of SGD. Its throughput is still PyTorch's, and that is what it is measured for.
"""
import argparse
import json
import math
import resource
import subprocess
import sys
import time


def run_one(args):
    import torch
    import torchvision

    device = torch.device(args.device)
    torch.manual_seed(0)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    tf32 = args.precision == "tf32"
    torch.backends.cuda.matmul.fp32_precision = "tf32" if tf32 else "ieee"
    torch.backends.cudnn.conv.fp32_precision = "tf32" if tf32 else "ieee"
    torch.backends.cudnn.benchmark = device.type == "cuda"

    model = torchvision.models.resnet50(num_classes=1000).to(device)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    optimizer = torch.optim.SGD([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=0.256 * args.batch / 256, momentum=0.875, weight_decay=3.0517578125e-05,
                                fused=True if args.fused else None)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=generator).to(device)
    images = images.contiguous(memory_format=memory_format)
    labels = torch.randint(0, 1000, (args.batch,), generator=generator).to(device)

    amp_dtype = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "amp_fp16")
    # The scale after each step, kept on the device: reading it every step would add a host
    # synchronisation that the plain training loop does not have. A skipped step backs it off.
    scale_history = []

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if scaler.is_enabled():
            scale_history.append(scaler._get_scale_async().clone())
        return loss.detach()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    # Timed as mixt bench times: the gaps between consecutive marks, one mark before the
    # first step and one after each, so whatever the loop does between steps counts on
    # both sides (CUDA events on the stream, no host synchronisation inside the loop).
    def mark():
        if device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    marks = [mark()]
    loss = None
    for i in range(args.warmup + args.steps):
        loss = step()
        marks.append(mark())
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        times = [a.elapsed_time(b) for a, b in zip(marks, marks[1:])]
        peak = torch.cuda.max_memory_allocated(device) / 2**20
        memory_kind = "CUDA caching-allocator peak"
    else:
        times = [(b - a) * 1000.0 for a, b in zip(marks, marks[1:])]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        memory_kind = "process peak RSS"
    timed = sorted(times[args.warmup:])
    skips = []
    if scale_history:  # amp_fp16 only (a disabled scaler has no scale)
        scales = torch.stack(scale_history).tolist()
        skips = [after < before for before, after in zip([scaler._init_scale] + scales, scales)]
    skipped = sum(skips)
    note = ""
    if args.fused and skips and skips[0] and not all(skips):  # an applied step read the buffers
        note = ("torch fused SGD + GradScaler skipped its first step: momentum from uninitialised memory "
                "(tests/golden/torch_fused_sgd_skip.py), loss not comparable")

    def percentile(q):
        position = q * (len(timed) - 1)
        below = math.floor(position)
        above = min(below + 1, len(timed) - 1)
        return timed[below] + (timed[above] - timed[below]) * (position - below)

    loss_value = float(loss)
    print(json.dumps({"policy": args.precision, "device": str(device), "batch": args.batch, "steps": args.steps,
                      "warmup": args.warmup, "images_per_s": 1000.0 * args.batch * len(timed) / sum(timed),
                      "step_ms_p50": percentile(0.5), "step_ms_p95": percentile(0.95), "peak_memory_mib": peak,
                      "memory_kind": memory_kind, "loss": loss_value, "loss_finite": math.isfinite(loss_value),
                      "skipped_steps": skipped, "torch": torch.__version__, **({"note": note} if note else {})}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--precision", default="fp32,tf32,amp_fp16,amp_bf16")
    parser.add_argument("--device", default="cuda" if "--device" not in sys.argv and _cuda() else "cpu")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--fused", action="store_true", help="torch.optim.SGD(fused=True)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args)
        return
    for policy in args.precision.split(","):
        command = [sys.executable, __file__, "--one", "--precision", policy, "--device", args.device,
                   "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
                   "--image-size", str(args.image_size), "--threads", str(args.threads),
                   "--channels-last" if args.channels_last else "--no-channels-last"] + (["--fused"] if args.fused else [])
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            print(json.dumps({"policy": policy, "error": result.stderr.strip().splitlines()[-1:]}))
        else:
            print(result.stdout.strip().splitlines()[-1])
        sys.stdout.flush()


def _cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


if __name__ == "__main__":
    main()
