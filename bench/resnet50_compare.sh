#!/usr/bin/env bash
# ResNet-50 v1.5, mixt vs plain PyTorch (torchvision resnet50, torch.autocast +
# torch.amp.GradScaler) on the same machine, same torch, same synthetic data, same batch
# and layout (channels_last), one policy per process on both sides. Prints one table with
# the ratio mixt / PyTorch per policy.
#
#   bench/resnet50_compare.sh [--device cpu|cuda] [--batch N] [--steps N] [--warmup N]
#                             [--precision fp32,tf32,amp_fp16,amp_bf16] [--threads N] [--fused]
#                             [--out DIR]
#
# --out DIR keeps both sides' results there (mixt's bench.json and bench.md with the
# environment they were measured in, PyTorch's pytorch.jsonl, the table as compare.md);
# without it they go to a temporary directory that is removed.
#
# --fused: SGD through the fused kernel on both sides (mixt optimizer.fused=true,
# torch.optim.SGD(fused=True)); the default is each side's default SGD for the device
# (single-tensor on the CPU, the _foreach_ ops on CUDA).
#
# Defaults: on a GPU batch 256, 30 timed steps after 10, all four policies; on the CPU
# batch 8, 3 after 1, without amp_fp16 (float16 on a CPU takes minutes a step).
# Both sides use lr 0.256 x batch / 256 (the recipe's linear scaling rule) held constant
# (no schedule) over the few steps timed, so their losses are comparable.
set -euo pipefail
cd "$(dirname "$0")/.."
MIXT=${MIXT:-build/bin/mixt}
DEVICE=""; BATCH=""; STEPS=""; WARMUP=""; THREADS=0; FUSED=false; PRECISION=""; OUT=""
while (($#)); do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --fused) FUSED=true; shift ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -z "$DEVICE" ]; then
  DEVICE=$(python3 -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
fi
if [ "$DEVICE" = cuda ]; then
  BATCH=${BATCH:-256}; STEPS=${STEPS:-30}; WARMUP=${WARMUP:-10}; PRECISION=${PRECISION:-fp32,tf32,amp_fp16,amp_bf16}
else
  BATCH=${BATCH:-8}; STEPS=${STEPS:-3}; WARMUP=${WARMUP:-1}; PRECISION=${PRECISION:-fp32,tf32,amp_bf16}
fi

if [ -n "$OUT" ]; then
  mkdir -p "$OUT"; out=$(cd "$OUT" && pwd)
else
  out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
fi
echo "mixt: $MIXT bench recipes/resnet50/synthetic.yaml ($DEVICE, batch $BATCH, $STEPS steps after $WARMUP, fused SGD: $FUSED)" >&2
"$MIXT" bench recipes/resnet50/synthetic.yaml --precision "$PRECISION" --steps "$STEPS" --warmup "$WARMUP" \
  --batch "$BATCH" trainer.device="$DEVICE" trainer.threads="$THREADS" output="$out" \
  optimizer.lr="$(python3 -c "print(0.256 * $BATCH / 256)")" optimizer.fused="$FUSED" scheduler=null >&2 || true
echo "PyTorch: bench/resnet50_vs_pytorch.py" >&2
python3 bench/resnet50_vs_pytorch.py --precision "$PRECISION" --device "$DEVICE" --batch "$BATCH" \
  --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" $([ "$FUSED" = true ] && echo --fused) > "$out/pytorch.jsonl"

python3 bench/resnet50_compare_table.py "$(find "$out" -name bench.json | head -n 1)" "$out/pytorch.jsonl" \
  "$DEVICE" "$BATCH" "$STEPS" "$WARMUP" | tee "$out/compare.md"
if [ -n "$OUT" ]; then echo "results kept in $out" >&2; fi
