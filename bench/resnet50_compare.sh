#!/usr/bin/env bash
# ResNet-50 v1.5, mixt vs plain PyTorch (torchvision resnet50, torch.autocast +
# torch.amp.GradScaler) on the same machine, same torch, same synthetic data, same batch
# and layout (channels_last), one policy per process on both sides. Prints one table with
# the ratio mixt / PyTorch per policy.
#
#   bench/resnet50_compare.sh [--device cpu|cuda] [--batch N] [--steps N] [--warmup N]
#                             [--precision fp32,tf32,amp_fp16,amp_bf16] [--threads N] [--fused]
#
# --fused: SGD through the fused kernel on both sides (mixt optimizer.fused=true,
# torch.optim.SGD(fused=True)); the default is each side's default SGD for the device
# (single-tensor on the CPU, the _foreach_ ops on CUDA).
#
# Defaults: on a GPU batch 256, 30 timed steps after 10; on the CPU batch 8, 3 after 1.
# Both sides use lr 0.256 x batch / 256 (the recipe's linear scaling rule) held constant
# (no schedule) over the few steps timed, so their losses are comparable.
set -euo pipefail
cd "$(dirname "$0")/.."
MIXT=${MIXT:-build/bin/mixt}
DEVICE=""; BATCH=""; STEPS=""; WARMUP=""; THREADS=0; FUSED=false
PRECISION=fp32,tf32,amp_fp16,amp_bf16
while (($#)); do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --fused) FUSED=true; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -z "$DEVICE" ]; then
  DEVICE=$(python3 -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
fi
if [ "$DEVICE" = cuda ]; then BATCH=${BATCH:-256}; STEPS=${STEPS:-30}; WARMUP=${WARMUP:-10};
else BATCH=${BATCH:-8}; STEPS=${STEPS:-3}; WARMUP=${WARMUP:-1}; fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "mixt: $MIXT bench recipes/resnet50/synthetic.yaml ($DEVICE, batch $BATCH, $STEPS steps after $WARMUP, fused SGD: $FUSED)" >&2
"$MIXT" bench recipes/resnet50/synthetic.yaml --precision "$PRECISION" --steps "$STEPS" --warmup "$WARMUP" \
  --batch "$BATCH" trainer.device="$DEVICE" trainer.threads="$THREADS" output="$out" \
  optimizer.lr="$(python3 -c "print(0.256 * $BATCH / 256)")" optimizer.fused="$FUSED" scheduler=null >&2 || true
echo "PyTorch: bench/resnet50_vs_pytorch.py" >&2
python3 bench/resnet50_vs_pytorch.py --precision "$PRECISION" --device "$DEVICE" --batch "$BATCH" \
  --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" $([ "$FUSED" = true ] && echo --fused) > "$out/pytorch.jsonl"

python3 - "$(find "$out" -name bench.json)" "$out/pytorch.jsonl" "$DEVICE" "$BATCH" "$STEPS" "$WARMUP" <<'PY'
import json, math, sys
mixt_file, torch_file, device, batch, steps, warmup = sys.argv[1:]
mixt = {r["policy"]: r for r in json.load(open(mixt_file))["results"]}
torch_rows = {r["policy"]: r for r in map(json.loads, open(torch_file))}

def num(row, key, fmt):
    if not row or "error" in row or key not in row:
        return "-"
    value = row[key]
    return fmt.format(value) if isinstance(value, (int, float)) and math.isfinite(value) else "-"

def ratio(a, b, key):
    try:
        return "{:.2f}".format(a[key] / b[key])
    except Exception:
        return "-"

print(f"ResNet-50 v1.5, synthetic 3x224x224, batch {batch}, channels_last, {steps} timed steps after {warmup}, {device}")
print("| policy | mixt img/s | PyTorch img/s | mixt/PyTorch | mixt p50 ms | PyTorch p50 ms | mixt peak MiB | PyTorch peak MiB | mem mixt/PyTorch | mixt loss | PyTorch loss | skipped mixt/PyTorch |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for policy in dict.fromkeys(list(mixt) + list(torch_rows)):
    m, t = mixt.get(policy), torch_rows.get(policy)
    note = ""
    for side, row in (("mixt", m), ("PyTorch", t)):
        if row and "error" in row:
            note += f" {side} failed: {row['error']}"
        elif row and not row.get("loss_finite", True):
            note += f" {side}: NON-FINITE LOSS"
        if row and row.get("note"):
            note += f" {side}: {row['note']}"
    skipped = f"{m.get('skipped_steps', '-') if m else '-'}/{t.get('skipped_steps', '-') if t else '-'}"
    print(f"| {policy} | {num(m,'images_per_s','{:.1f}')} | {num(t,'images_per_s','{:.1f}')} | {ratio(m,t,'images_per_s') if m and t else '-'}"
          f" | {num(m,'step_ms_p50','{:.1f}')} | {num(t,'step_ms_p50','{:.1f}')} | {num(m,'peak_memory_mib','{:.0f}')}"
          f" | {num(t,'peak_memory_mib','{:.0f}')} | {ratio(m,t,'peak_memory_mib') if m and t else '-'}"
          f" | {num(m,'loss','{:.4f}')} | {num(t,'loss','{:.4f}')} | {skipped} |{note}")
for name, rows in (("mixt", mixt), ("PyTorch", torch_rows)):
    fp32 = rows.get("fp32")
    for amp in ("amp_fp16", "amp_bf16"):
        a = rows.get(amp)
        if fp32 and a and "error" not in fp32 and "error" not in a:
            print(f"{name}: {amp} peak memory / fp32 = {a['peak_memory_mib'] / fp32['peak_memory_mib']:.2f}")
memory = "CUDA caching-allocator peak" if device == "cuda" else "process peak RSS (includes the framework itself)"
print(f"memory column: {memory}")
PY
