#!/usr/bin/env bash
# Every GPU check (precision, ResNet-50, NCCL) in one call, for a session that has ~15 minutes of an
# H200 in all (start-up included): run it once with `timeout_s` ~600 and carry .deps/.
#   1. bench/gpu/precision_check.sh  (builds build-gpu; autocast/tf32/policies; < 5 min)
#   2. bench/gpu/resnet50.sh         (ResNet-50 mixt vs PyTorch, 4 policies + fused AMP)
#   3. NCCL, world size 1, end to end under torchrun, with sync_batchnorm on a batch-norm
#      model (one rank: the plain path, but the NCCL process group and the wiring are real).
# Each part has its own time limit, so a slow part cannot starve the others of output.
# Output: $OUT (or bench/gpu/out)/ — precision_check.log, summary.md, resnet50*.md, nccl.log.
#     bench/gpu/prepare_deps.sh   # here, once
#     bench/gpu/all.sh            # on the GPU machine, from the repository root
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export OUT=${OUT:-$ROOT/bench/gpu/out}
mkdir -p "$OUT"
START=$SECONDS
part() { printf '\n#### [%3ds] %s\n' "$((SECONDS - START))" "$*"; }

part "precision_check"
timeout 270 bench/gpu/precision_check.sh || echo "precision_check: exit $?"

part "resnet50"
STEPS=${STEPS:-20} WARMUP=${WARMUP:-5} timeout 240 bench/gpu/resnet50.sh || echo "resnet50: exit $?"

part "NCCL, world size 1"
export LD_LIBRARY_PATH="$ROOT/.deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
timeout 60 torchrun --no-python --nproc-per-node=1 build-gpu/bin/mixt run recipes/fashion_mnist.yaml \
  trainer.device=cuda trainer.distributed.backend=nccl trainer.distributed.sync_batchnorm=true \
  model.batch_norm=true trainer.epochs=1 trainer.max_steps_per_epoch=200 output="$OUT/runs" \
  data.train.root="$ROOT/.deps/data/fashion-mnist" data.val.root="$ROOT/.deps/data/fashion-mnist" 2>&1 |
  tee "$OUT/nccl.log" || echo "nccl: exit $?"
part "done"
