#!/usr/bin/env bash
# Data parallel on CPU (Gloo, loopback): samples/s of 2 ranks with the gradient all-reduce
# started from gradient hooks during backward (trainer.distributed.overlap=true) against
# started after backward (false). A simple_cnn whose 3.2M-parameter fully connected layer
# (12.8 MB of gradients) is the last layer of forward, hence the first gradient of
# backward: its all-reduce can run while the convolutions' gradients are computed.
#   bench/distributed_overlap.sh [build dir] [repetitions]
set -euo pipefail
BUILD=${1:-build}
REPS=${2:-3}
MIXT=$(realpath "$BUILD/bin/mixt")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/r.yaml" <<'YAML'
name: overlap
model:     { name: simple_cnn, channels: [32, 64], hidden: 1024 }
precision: { name: fp32 }
optimizer: { name: sgd, lr: 0.01, momentum: 0.9 }
data:
  train: { name: fashion_mnist, split: train, batch_size: 32, limit: 4096 }
trainer: { epochs: 1, seed: 0, threads: 1, log_every: 1000, max_steps_per_epoch: 40,
           distributed: { backend: gloo, timeout: 120 } }
output: runs
YAML
cd "$WORK"
for rep in $(seq "$REPS"); do
  for overlap in true false; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for rank in 1 0; do
      RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$MIXT" run r.yaml trainer.distributed.overlap=$overlap data.val=null > "rank$rank.log" 2>&1 &
    done
    wait
    printf 'overlap=%-5s %s\n' "$overlap" "$(grep '^done:' rank0.log)"
  done
done
