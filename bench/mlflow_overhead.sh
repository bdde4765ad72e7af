#!/usr/bin/env bash
# The mlflow callback's per-step cost: steps/s of recipes/fashion_mnist.yaml (STEPS optimizer
# steps, one epoch, no validation) without and with the callback sending to a local MLflow
# server (tests/support/mlflow_server.py: SQLite, a free port), at trainer.log_every 100 (the
# recipe's) and 1 (a metrics line and a wake-up of the sender every step). Prints one table.
#   bench/mlflow_overhead.sh [STEPS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
THREADS=${2:-2}
MIXT=${MIXT:-build/bin/mixt}

out=$(mktemp -d)
server="$out/server"
trap 'python3 tests/support/mlflow_server.py stop "$server" 2>/dev/null || true; rm -rf "$out"' EXIT
port=$(python3 tests/support/mlflow_server.py serve "$server")

# A first run warms the page cache and the allocator: without it the first row measured
# ~1.35x slower than the same run repeated.
"$MIXT" run recipes/fashion_mnist.yaml data.val=null trainer.epochs=1 trainer.threads="$THREADS" \
  trainer.max_steps_per_epoch="$STEPS" "callbacks=[]" output="$out/warm-up" > /dev/null 2>&1

rows=()
for log_every in 100 1; do
  for with in no yes; do
    callbacks="[]"
    [ "$with" = yes ] && callbacks="[{name: mlflow, tracking_uri: 'http://127.0.0.1:$port', experiment: bench}]"
    dir="$out/runs-$log_every-$with"
    "$MIXT" run recipes/fashion_mnist.yaml data.val=null trainer.epochs=1 trainer.threads="$THREADS" \
      trainer.max_steps_per_epoch="$STEPS" trainer.log_every="$log_every" "callbacks=$callbacks" \
      output="$dir" > "$out/log-$log_every-$with.txt" 2>&1
    rows+=("$log_every $with $(find "$dir" -name metrics.jsonl)")
  done
done

python3 - "${rows[@]}" <<'PY'
import json, sys
print(f"{'trainer.log_every':>17} | {'mlflow':>6} | {'steps/s':>8} | {'vs without':>10}")
print(f"{'-' * 17}-|-{'-' * 6}-|-{'-' * 8}-|-{'-' * 10}")
without = {}
for row in sys.argv[1:]:
    log_every, mlflow, path = row.split(" ", 2)
    steps = [json.loads(line) for line in open(path) if '"event":"step"' in line]
    rate = steps[-1]["step"] / steps[-1]["epoch_elapsed_s"]
    if mlflow == "no":
        without[log_every] = rate
    print(f"{log_every:>17} | {mlflow:>6} | {rate:8.1f} | {rate / without[log_every]:10.3f}")
PY
