#!/usr/bin/env python3
"""The table of bench/resnet50_compare.sh: mixt's bench.json and PyTorch's JSON lines
(bench/resnet50_vs_pytorch.py), one row per policy, with the ratio mixt / PyTorch.

    resnet50_compare_table.py MIXT_BENCH_JSON PYTORCH_JSONL DEVICE BATCH STEPS WARMUP

A side that failed, or whose loss was inf/NaN, shows no figures and no ratio: its numbers
would not mean what the columns say. The note column says why. An empty MIXT_BENCH_JSON
(mixt bench wrote none) leaves the mixt columns empty.
"""
import json
import math
import sys


def load_rows(mixt_file, torch_file):
    mixt = {}
    if mixt_file:
        with open(mixt_file) as f:
            mixt = {r["policy"]: r for r in json.load(f)["results"]}
    with open(torch_file) as f:
        torch_rows = {r["policy"]: r for r in map(json.loads, filter(str.strip, f))}
    return mixt, torch_rows


def finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def measured(row):
    """A row whose figures mean what the columns say."""
    return bool(row) and "error" not in row and row.get("loss_finite", True) and finite(row.get("images_per_s"))


def figure(row, key, fmt):
    return fmt.format(row[key]) if measured(row) and finite(row.get(key)) else "-"


def ratio(a, b, key):
    if measured(a) and measured(b) and finite(a.get(key)) and finite(b.get(key)) and b[key] > 0:
        return "{:.2f}".format(a[key] / b[key])
    return "-"


def loss(row):
    if not row or "error" in row:
        return "-"
    value = row.get("loss")
    return "{:.4f}".format(value) if finite(value) else "non-finite"


def note(m, t):
    notes = []
    for side, row in (("mixt", m), ("PyTorch", t)):
        if not row:
            notes.append(f"{side}: no result")
        elif "error" in row:
            notes.append(f"{side} failed: {row['error']}")
        elif not row.get("loss_finite", True):
            notes.append(f"{side}: NON-FINITE LOSS, figures not reported")
        if row and row.get("note"):
            notes.append(f"{side}: {row['note']}")
    return "; ".join(notes)


def main():
    mixt_file, torch_file, device, batch, steps, warmup = sys.argv[1:]
    mixt, torch_rows = load_rows(mixt_file, torch_file)
    print(f"ResNet-50 v1.5, synthetic 3x224x224, batch {batch}, channels_last, {steps} timed steps after {warmup}, "
          f"{device}")
    print("| policy | mixt img/s | PyTorch img/s | mixt/PyTorch | mixt p50 ms | PyTorch p50 ms | mixt p95 ms "
          "| PyTorch p95 ms | mixt peak MiB | PyTorch peak MiB | mem mixt/PyTorch | mixt loss | PyTorch loss "
          "| skipped mixt/PyTorch | note |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for policy in dict.fromkeys(list(mixt) + list(torch_rows)):
        m, t = mixt.get(policy), torch_rows.get(policy)
        skipped = "/".join(str(r.get("skipped_steps", "-")) if r else "-" for r in (m, t))
        cells = [policy, figure(m, "images_per_s", "{:.1f}"), figure(t, "images_per_s", "{:.1f}"),
                 ratio(m, t, "images_per_s"), figure(m, "step_ms_p50", "{:.1f}"), figure(t, "step_ms_p50", "{:.1f}"),
                 figure(m, "step_ms_p95", "{:.1f}"), figure(t, "step_ms_p95", "{:.1f}"),
                 figure(m, "peak_memory_mib", "{:.0f}"), figure(t, "peak_memory_mib", "{:.0f}"),
                 ratio(m, t, "peak_memory_mib"), loss(m), loss(t), skipped, note(m, t)]
        print("| " + " | ".join(cells) + " |")
    if not mixt:
        print("mixt: no results (mixt bench wrote no bench.json; its messages are above)")
    for name, rows in (("mixt", mixt), ("PyTorch", torch_rows)):
        fp32 = rows.get("fp32")
        for amp in ("amp_fp16", "amp_bf16"):
            if measured(fp32) and measured(rows.get(amp)):
                print(f"{name}: {amp} peak memory / fp32 = "
                      f"{rows[amp]['peak_memory_mib'] / fp32['peak_memory_mib']:.2f}")
    memory = "CUDA caching-allocator peak" if device == "cuda" else "process peak RSS (includes the framework itself)"
    print(f"memory column: {memory}")


if __name__ == "__main__":
    main()
