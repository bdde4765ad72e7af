#!/usr/bin/env bash
# mixt vs plain PyTorch on recipes/fashion_mnist.yaml: same model, batch, optimizer, data
# and intra-op thread count, same torch wheel. Times STEPS optimizer steps after WARMUP
# untimed ones in each and prints one table with the ratio mixt / PyTorch.
#   bench/fashion_mnist_vs_pytorch.sh [STEPS] [WARMUP] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-200}
WARMUP=${2:-20}
THREADS=${3:-2}
MIXT=${MIXT:-build/bin/mixt}
BATCH=128
(( STEPS % WARMUP == 0 )) || { echo "STEPS must be a multiple of WARMUP" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$MIXT" run recipes/fashion_mnist.yaml data.val=null trainer.epochs=1 trainer.threads="$THREADS" \
  trainer.max_steps_per_epoch=$((STEPS + WARMUP)) trainer.log_every="$WARMUP" \
  data.train.batch_size=$BATCH output="$out" > "$out/mixt.log"
metrics=$(find "$out" -name metrics.jsonl)
mixt_rate=$(python3 - "$metrics" "$WARMUP" "$STEPS" "$BATCH" <<'PY'
import json, sys
path, warmup, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t = {r["epoch_step"]: r["epoch_elapsed_s"] for r in map(json.loads, open(path)) if r["event"] == "step"}
print(steps * batch / (t[warmup + steps] - t[warmup]))
PY
)
torch_json=$(python3 bench/fashion_mnist_reference.py --steps "$STEPS" --warmup "$WARMUP" --batch $BATCH --threads "$THREADS")
torch_rate=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["samples_per_s"])' "$torch_json")

python3 - "$mixt_rate" "$torch_rate" "$STEPS" "$WARMUP" "$THREADS" <<'PY'
import sys
mixt, torch_rate, steps, warmup, threads = map(float, sys.argv[1:])
print(f"Fashion-MNIST simple_cnn, batch 128, AdamW, {int(steps)} timed steps after {int(warmup)} warm-up, {int(threads)} threads")
print(f"| {'':<8} | {'samples/s':>10} |")
print(f"|{'-'*10}|{'-'*12}|")
print(f"| {'mixt':<8} | {mixt:>10.0f} |")
print(f"| {'PyTorch':<8} | {torch_rate:>10.0f} |")
print(f"mixt / PyTorch = {mixt / torch_rate:.2f}")
PY
