#!/usr/bin/env python3
"""Per-rank peak memory and speed of GPT-2 124M (float32, AdamW) under each
trainer.distributed.sharding, at 1, 2 and 4 CPU ranks of this machine, next to ZeRO's formula
for the weights, gradients and optimizer state and next to PyTorch FSDP2 (fully_shard per
block, bench/sharding/fsdp2_gpt2.py) on the same ranks, batch, context and tokens. Prints one
markdown table; never fails on time.

    bench/sharding/memory.py [--ranks 1,2,4] [--modes none,optimizer,gradients,parameters] [--context 256]
                             [--steps 3] [--no-fsdp2] [--precision fp32] [--out DIR]
(a mode may be parameters:no-prefetch: trainer.distributed.prefetch: false; --precision another
policy for mixt's runs: bf16_master has a formula of its own and runs FSDP2 with
MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32); others leave the formula
column empty and do not run FSDP2)

mixt's peak is each worker's VmHWM (peak RSS) read every 10 ms from /proc until its run
writes the epoch's checkpoint (so the figure is training's, not the checkpoint's); FSDP2's
is the process's ru_maxrss after its steps (it writes no checkpoint). Tokens/s: the timed
steps (all but the first) over the world, from mixt's metrics.jsonl (epoch_elapsed_s) and from the
FSDP2 script's clock. Both sides use 1 thread a rank. Run it on a quiet machine: the ranks
share its cores.
"""
import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
# transformers' num_parameters() at context 1024 (tied head), and the width the position
# table shrinks by with a shorter context.
MODELS = {"gpt2": (124_439_808, 768), "gpt2_large": (774_030_080, 1280)}


def formula_gib(mode, world, context, model="gpt2", precision="fp32"):
    """Bytes a rank keeps of weights, gradients and AdamW state, in GiB; None where unknown."""
    parameters, width = MODELS[model]
    psi = parameters - (1024 - context) * width
    # sharding: parameters keeps the root whole (token and position tables, final norm).
    root = (50257 + context + 2) * width
    if precision == "fp32":
        per = {"none": 16 * psi, "optimizer": 8 * psi + 8 * psi / world, "gradients": 4 * psi + 12 * psi / world,
               "parameters": 16 * psi / world + 4 * root * (1 - 1 / world), "fsdp2": 16 * psi / world}[mode]
    elif precision == "bf16_master":
        # bfloat16 weights (2) and gradients (2); float32 masters (4), their gradients (4) and
        # AdamW's moments (8), which sharding cuts (16 / N); parameters keeps the root's
        # bfloat16 weights whole, FSDP2 shards the root too.
        per = {"none": 20 * psi, "optimizer": 4 * psi + 16 * psi / world, "gradients": 2 * psi + 16 * psi / world,
               "parameters": 16 * psi / world + 2 * root, "fsdp2": 16 * psi / world}[mode]
    else:
        return None
    return per / 2**30


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().split()
        except OSError:
            continue
        if int(fields[3]) == pid:
            found.append(int(entry))
    return found


def peak_rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def run_mixt(args, tokens, world, mode, out):
    # "parameters:no-prefetch": sharding: parameters gathering one block at a time.
    sharding, _, variant = mode.partition(":")
    output = out / f"mixt-{world}-{mode.replace(':', '-')}"
    command = ["torchrun", "--standalone", f"--nproc-per-node={world}", "--no-python", args.mixt, "run",
               str(ROOT / "recipes/gpt2/gpt2_124m.yaml"), f"precision.name={args.precision}",
               f"model={{name: {args.model}, context_length: {args.context}, dropout: 0.0, attention_dropout: 0.0}}", "optimizer.fused=false",
               "scheduler=null", "callbacks=[]", "data.val=null", "trainer.accumulate=1", "trainer.epochs=1",
               f"trainer.max_steps_per_epoch={args.steps + 1}", f"data.train.files={tokens}",
               f"data.train.context={args.context}",
               "data.train.batch_size=1", "data.train.workers=0", "trainer.threads=1", "trainer.log_every=1",
               "trainer.distributed.backend=gloo", f"trainer.distributed.sharding={sharding}", f"output={output}"]
    if variant == "no-prefetch":
        command.append("trainer.distributed.prefetch=false")
    log = open(out / f"mixt-{world}-{mode.replace(':', '-')}.log", "w")
    agent = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, OMP_NUM_THREADS="1"))
    peaks = {}
    while agent.poll() is None:
        checkpoints = list(output.glob("*/*/checkpoints/*"))
        if not checkpoints:
            for worker in children(agent.pid):
                peak = peak_rss_mib(worker)
                if peak is not None:
                    peaks[worker] = max(peaks.get(worker, 0.0), peak)
        time.sleep(0.01)
    log.close()
    if agent.returncode != 0 or not peaks:
        return {"error": f"exit {agent.returncode}: see {log.name}"}
    elapsed = []  # rank 0's seconds into the epoch at the end of each step
    for metrics in output.glob("*/*/metrics.jsonl"):
        for line in metrics.read_text().splitlines():
            event = json.loads(line)
            if event.get("event") == "step":
                elapsed.append(event["epoch_elapsed_s"])
    timed = len(elapsed) - 1  # steps after the first
    speed = world * args.context * timed / (elapsed[-1] - elapsed[0]) if timed > 0 else float("nan")
    return {"peak_mib": max(peaks.values()), "tokens_per_s": speed}


def library_baseline_mib(command):
    """The peak RSS of `command` alone: what a side's process holds before any model (its
    libraries: LibTorch and mixt's plugins; Python, torch and transformers)."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    result = subprocess.run([sys.executable, "-c", probe] + command, capture_output=True, text=True)
    return int(result.stdout.strip()) / 1024.0


def run_fsdp2(args, tokens, world, out):
    command = ["torchrun", "--standalone", f"--nproc-per-node={world}", str(ROOT / "bench/sharding/fsdp2_gpt2.py"),
               "--tokens", str(tokens), "--context", str(args.context), "--steps", str(args.steps)]
    if args.precision == "bf16_master":
        command.append("--bf16")
    result = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    (out / f"fsdp2-{world}.log").write_text(result.stdout + result.stderr)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        return {"error": f"exit {result.returncode}: see fsdp2-{world}.log"}
    return {"peak_mib": max(line["peak_rss_mib"] for line in lines),
            "tokens_per_s": min(line["tokens_per_s"] for line in lines)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--modes", default="none,optimizer,gradients,parameters")
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--no-fsdp2", action="store_true")
    parser.add_argument("--model", default="gpt2", choices=sorted(MODELS),
                        help="gpt2 (124M: the table's) or gpt2_large (774M: what fits on which ranks; mixt only)")
    parser.add_argument("--precision", default="fp32",
                        help="mixt's precision.name (formulas for fp32 and bf16_master; FSDP2 runs for those)")
    parser.add_argument("--mixt", default=str(ROOT / "build/bin/mixt"))
    parser.add_argument("--out")
    args = parser.parse_args()
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="mixt-sharding-")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    tokens = out / "tokens.bin"
    windows = 4 * 4 * (args.steps + 2)
    np.random.default_rng(0).integers(0, 50257, size=windows * (args.context + 1) + 1, dtype=np.uint16).tofile(tokens)

    baselines = {"mixt": library_baseline_mib([args.mixt, "list"]),
                 "FSDP2": library_baseline_mib([sys.executable, "-c", "import torch.distributed.fsdp, transformers; "
                                                "from transformers import GPT2LMHeadModel"])}
    rows = []
    for world in [int(w) for w in args.ranks.split(",")]:
        baseline = None
        for mode in args.modes.split(","):
            if world == 1 and mode != "none":
                continue
            result = run_mixt(args, tokens, world, mode, out)
            if mode == "none":
                baseline = result.get("tokens_per_s")
            rows.append((world, f"mixt {mode}",
                         formula_gib(mode.partition(":")[0], world, args.context, args.model, args.precision),
                         result, baseline))
            print(f"ranks {world}, mixt {mode}: {result}", file=sys.stderr, flush=True)
        if not args.no_fsdp2 and args.model == "gpt2" and args.precision in ("fp32", "bf16_master"):
            result = run_fsdp2(args, tokens, world, out)
            name = "FSDP2 fully_shard" + (" (bf16 MixedPrecisionPolicy)" if args.precision == "bf16_master" else "")
            rows.append((world, name, formula_gib("fsdp2", world, args.context, "gpt2", args.precision), result,
                         baseline))
            print(f"ranks {world}, FSDP2: {result}", file=sys.stderr, flush=True)

    cpu = platform.processor() or "?"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except StopIteration:
        pass
    print(f"{args.model} ({MODELS[args.model][0] / 1e6:.0f}M), {args.precision}, AdamW, context {args.context}, batch 1 a rank, {args.steps} timed steps; "
          f"{os.cpu_count()} cores of {cpu}; torch {__import__('torch').__version__}\n")
    print("| ranks | sharding | weights+grads+AdamW by formula (GiB) | peak RSS a rank (GiB) | "
          "above the libraries (GiB) | tokens/s | vs mixt none, same ranks |")
    print("|---|---|---|---|---|---|---|")
    for world, name, formula, result, baseline in rows:
        formula = f"{formula:.2f}" if formula is not None else ""
        if "error" in result:
            print(f"| {world} | {name} | {formula} | {result['error']} | | | |")
            continue
        libraries = baselines["FSDP2" if name.startswith("FSDP2") else "mixt"]
        ratio = result["tokens_per_s"] / baseline if baseline else float("nan")
        print(f"| {world} | {name} | {formula} | {result['peak_mib'] / 1024:.2f} | "
              f"{(result['peak_mib'] - libraries) / 1024:.2f} | {result['tokens_per_s']:.0f} | {ratio:.2f} |")
    print(f"\nThe libraries alone: mixt {baselines['mixt'] / 1024:.2f} GiB (`mixt list`), the FSDP2 script's "
          f"Python with torch and transformers imported {baselines['FSDP2'] / 1024:.2f} GiB.")
    print(f"\n(logs and runs in {out})")


if __name__ == "__main__":
    main()
