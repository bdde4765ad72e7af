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
# mixt's rate comes from its metrics lines, logged every WARMUP steps.
(( STEPS > 0 && WARMUP > 0 && STEPS % WARMUP == 0 )) || {
  echo "STEPS and WARMUP must be above 0 and STEPS a multiple of WARMUP (mixt logs every WARMUP steps)" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$MIXT" run recipes/fashion_mnist.yaml data.val=null trainer.epochs=1 trainer.threads="$THREADS" \
  trainer.max_steps_per_epoch=$((STEPS + WARMUP)) trainer.log_every="$WARMUP" \
  data.train.batch_size=$BATCH output="$out" > "$out/mixt.log"
metrics=$(find "$out" -name metrics.jsonl)
torch_json=$(python3 bench/fashion_mnist_reference.py --steps "$STEPS" --warmup "$WARMUP" --batch $BATCH --threads "$THREADS")

# The loss of the last step on each side shows that both trained the same way.
python3 - "$metrics" "$torch_json" "$STEPS" "$WARMUP" "$THREADS" "$BATCH" <<'PY'
import json, sys
path, torch_json = sys.argv[1], json.loads(sys.argv[2])
steps, warmup, threads, batch = map(int, sys.argv[3:])
logged = {r["epoch_step"]: r for r in map(json.loads, open(path)) if r["event"] == "step"}
mixt_rate = steps * batch / (logged[warmup + steps]["epoch_elapsed_s"] - logged[warmup]["epoch_elapsed_s"])
torch_rate = torch_json["samples_per_s"]
print(f"Fashion-MNIST simple_cnn, batch 128, AdamW, {steps} timed steps after {warmup} warm-up, {threads} threads")
print(f"| {'':<8} | {'samples/s':>10} | {'last loss':>10} |")
print(f"|{'-'*10}|{'-'*12}|{'-'*12}|")
print(f"| {'mixt':<8} | {mixt_rate:>10.0f} | {logged[warmup + steps]['loss']:>10.4f} |")
print(f"| {'PyTorch':<8} | {torch_rate:>10.0f} | {torch_json['last_loss']:>10.4f} |")
print(f"mixt / PyTorch = {mixt_rate / torch_rate:.2f}")
PY
