#!/usr/bin/env bash
# Activation checkpointing, mixt vs plain PyTorch (torch.utils.checkpoint on the same
# blocks) on the same machine: ResNet-50 or ViT-B/16 on one synthetic 224x224 batch, peak
# memory and step time with every activation kept and with every block recomputed, mixt
# under each --precision policy. Prints one table: per row the figures and the ratios to
# PyTorch eager fp32 without checkpointing (the baseline users start from).
#
#   bench/memory/activation_checkpointing.sh [--model resnet50|vit_b_16] [--batch N]
#       [--steps N] [--warmup N] [--precision fp32,bf16_master] [--device cpu|cuda] [--out DIR]
#       [--pytorch-allocator system|lean|both]
#
# Defaults: resnet50, batch 64, 2 timed steps after 1, fp32 (a CPU: minutes a step at batch 64).
# mixt runs with its host allocator (docs/memory.md#the-host-allocator: MIXT_HOST_ALLOCATOR
# in the environment chooses); PyTorch as it comes (system), with the same settings by
# environment (lean: THP_MEM_ALLOC_ENABLE=1, glibc's mmap threshold 1 MiB), or both.
set -euo pipefail
cd "$(dirname "$0")/../.."
MIXT=${MIXT:-build/bin/mixt}
MODEL=resnet50; BATCH=64; STEPS=2; WARMUP=1; PRECISION=fp32; DEVICE=cpu; OUT=""; PYTORCH_ALLOCATOR=system
while (($#)); do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --pytorch-allocator) PYTORCH_ALLOCATOR=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -n "$OUT" ]; then mkdir -p "$OUT"; out=$(cd "$OUT" && pwd); else out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi

model_override=()
[ "$MODEL" = resnet50 ] || model_override=("model={name: $MODEL}" "data.train.channels_last=false")
echo "mixt: $MIXT bench recipes/resnet50/synthetic.yaml ($MODEL, $DEVICE, batch $BATCH)" >&2
"$MIXT" bench recipes/resnet50/synthetic.yaml --precision "$PRECISION" --activation-checkpointing none,all \
  --steps "$STEPS" --warmup "$WARMUP" --batch "$BATCH" trainer.device="$DEVICE" output="$out/mixt" scheduler=null \
  optimizer.lr="$(python3 -c "print(0.256 * $BATCH / 256)")" "${model_override[@]}" >&2 || true
echo "PyTorch: bench/memory/pytorch_checkpointing.py" >&2
case "$PYTORCH_ALLOCATOR" in system) allocators=(system) ;; lean) allocators=(lean) ;; both) allocators=(system lean) ;;
  *) echo "--pytorch-allocator: system, lean or both, not '$PYTORCH_ALLOCATOR'" >&2; exit 2 ;; esac
: > "$out/pytorch.jsonl"
for allocator in "${allocators[@]}"; do
  environment=(ALLOCATOR="$allocator")
  [ "$allocator" = lean ] && environment+=(THP_MEM_ALLOC_ENABLE=1 GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1048576)
  env "${environment[@]}" python3 bench/memory/pytorch_checkpointing.py --model "$MODEL" --device "$DEVICE" \
    --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" |
    python3 -c "import json,sys; [print(json.dumps({**json.loads(l), 'allocator': '$allocator'})) for l in sys.stdin if l.strip()]" \
    >> "$out/pytorch.jsonl"
done
python3 - "$out" "$MODEL" <<'PY'
import glob, json, sys
out, model = sys.argv[1], sys.argv[2]
mixt = json.load(open(sorted(glob.glob(f"{out}/mixt/*/*/bench.json"))[-1]))
torch_rows = [json.loads(line) for line in open(f"{out}/pytorch.jsonl") if line.strip()]
env = mixt["environment"]
print(f"{model}, batch {mixt['results'][0].get('batch', '?')}; {env['cpu']} ({env['cpu_cores']} cores), "
      f"LibTorch {env['libtorch']}, {env['date']}\n")
base = next((r for r in torch_rows if r.get("activation_checkpointing") == "none" and "error" not in r
             and r["allocator"] == torch_rows[0]["allocator"]), None)
print(f"mixt's host allocator: {env.get('host_allocator', '?')}\n")
print("| side | policy | activation checkpointing | peak memory (MiB) | step p50 (ms) | memory / PyTorch fp32 | time / PyTorch fp32 |")
print("|---|---|---|---:|---:|---:|---:|")
def row(side, policy, setting, r):
    if "error" in r:
        print(f"| {side} | {policy} | {setting} | - | - | - | - ({r['error']}) |"); return
    mem, ms = r["peak_memory_mib"], r["step_ms_p50"]
    ratio = lambda a, b: f"{a / b:.2f}" if base else "-"
    print(f"| {side} | {policy} | {setting} | {mem:.0f} | {ms:.0f} | {ratio(mem, base['peak_memory_mib'])} | "
          f"{ratio(ms, base['step_ms_p50'])} |")
for r in torch_rows:
    row("PyTorch eager" + (" (lean allocator env)" if r["allocator"] == "lean" else ""), "fp32",
        r["activation_checkpointing"], r)
for r in mixt["results"]:
    row("mixt", r["policy"], r.get("activation_checkpointing", "-"), r)
PY
