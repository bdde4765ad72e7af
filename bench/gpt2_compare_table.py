#!/usr/bin/env python3
"""The table of bench/gpt2_compare.sh: mixt's bench.json files and PyTorch's JSON lines
(bench/gpt2_vs_pytorch.py), one row per policy, activation-checkpointing setting and mixt's
loss (fused: causal_lm's default; plain: fused_loss false, as PyTorch's), in tokens per
second (samples/s x context) and peak memory, with the ratios mixt / PyTorch.

    gpt2_compare_table.py --mixt BENCH_JSON [--mixt BENCH_JSON ...] [--mixt-plain BENCH_JSON ...]
                          --pytorch JSONL --title TEXT --device D --batch B --context T
                          --steps N --warmup W

A side that failed, or whose loss was inf/NaN, shows no figures and no ratio (the rules of
bench/resnet50_compare_table.py, whose helpers this uses); the note column says why.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet50_compare_table import figure, finite, loss, measured, note, ratio  # noqa: E402


def key(row):
    return row["policy"], row.get("activation_checkpointing", "none")


def load(mixt_files, plain_files, torch_file, context):
    mixt = {}
    for files, loss_kind in ((mixt_files, "fused"), (plain_files, "plain")):
        for path in files:
            if path and os.path.exists(path):
                with open(path) as f:
                    for row in json.load(f)["results"]:
                        mixt[key(row) + (loss_kind,)] = row
    with open(torch_file) as f:
        torch_rows = {key(r): r for r in map(json.loads, filter(str.strip, f))}
    for row in list(mixt.values()) + list(torch_rows.values()):
        if finite(row.get("images_per_s")) and "tokens_per_s" not in row:
            row["tokens_per_s"] = row["images_per_s"] * context
    return mixt, torch_rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mixt", action="append", default=[])
    parser.add_argument("--mixt-plain", action="append", default=[])
    parser.add_argument("--title", default="GPT-2 124M")
    parser.add_argument("--pytorch", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--context", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    args = parser.parse_args()
    mixt, torch_rows = load(args.mixt, args.mixt_plain, args.pytorch, args.context)
    print(f"{args.title}, random tokens, batch {args.batch} x context {args.context}, {args.steps} timed steps after "
          f"{args.warmup}, AdamW, {args.device}")
    print("| policy | act. ckpt | mixt loss fn | mixt tokens/s | PyTorch tokens/s | mixt/PyTorch | mixt p50 ms | PyTorch p50 ms "
          "| mixt peak MiB | PyTorch peak MiB | mem mixt/PyTorch | mixt loss | PyTorch loss | skipped mixt/PyTorch "
          "| note |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    keys = list(mixt) + [k + ("-",) for k in torch_rows if not any(m[:2] == k for m in mixt)]
    for k in keys:
        m, t = mixt.get(k), torch_rows.get(k[:2])
        skipped = "/".join(str(r.get("skipped_steps", "-")) if r else "-" for r in (m, t))
        cells = [k[0], k[1], k[2], figure(m, "tokens_per_s", "{:.0f}"), figure(t, "tokens_per_s", "{:.0f}"),
                 ratio(m, t, "tokens_per_s"), figure(m, "step_ms_p50", "{:.0f}"), figure(t, "step_ms_p50", "{:.0f}"),
                 figure(m, "peak_memory_mib", "{:.0f}"), figure(t, "peak_memory_mib", "{:.0f}"),
                 ratio(m, t, "peak_memory_mib"), loss(m), loss(t), skipped, note(m, t)]
        print("| " + " | ".join(cells) + " |")
    if not mixt:
        print("mixt: no results (mixt bench wrote no bench.json; its messages are above)")
    for name, rows in (("mixt", mixt), ("PyTorch", torch_rows)):
        tail = ("fused",) if name == "mixt" else ()
        fp32, checkpointed = rows.get(("fp32", "none") + tail), rows.get(("fp32", "all") + tail)
        if measured(fp32) and measured(checkpointed):
            print(f"{name}: fp32 with activation checkpointing / without: peak memory "
                  f"{checkpointed['peak_memory_mib'] / fp32['peak_memory_mib']:.2f}, tokens/s "
                  f"{checkpointed['tokens_per_s'] / fp32['tokens_per_s']:.2f}")
    fused, plain = mixt.get(("fp32", "none", "fused")), mixt.get(("fp32", "none", "plain"))
    if measured(fused) and measured(plain):
        print(f"mixt: fp32 fused loss / plain loss: peak memory {fused['peak_memory_mib'] / plain['peak_memory_mib']:.2f}, "
              f"tokens/s {fused['tokens_per_s'] / plain['tokens_per_s']:.2f}")
    memory = ("CUDA caching-allocator peak" if args.device == "cuda"
              else "process peak RSS (includes each side's runtime: LibTorch for mixt, Python + torch + transformers)")
    print(f"memory column: {memory}")


if __name__ == "__main__":
    main()
