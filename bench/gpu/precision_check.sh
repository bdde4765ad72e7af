#!/usr/bin/env bash
# The precision policies on a CUDA machine, in one prepared script:
#   1. builds mixt (torch 2.11.0+cu130 wheel, cmake, nvcc; no package registries: the other
#      dependencies come from .deps/, which bench/gpu/prepare_deps.sh fills on a machine that
#      has them),
#   2. checks autocast output dtypes on CUDA against Python's torch.autocast on the same GPU,
#   3. checks that `tf32` really switches cuBLAS/cuDNN to TF32 (and `fp32` back off),
#   4. trains a few hundred steps of Fashion-MNIST with each policy.
# Meant to finish in under 5 minutes on one H200 with 16 cores. From the repository root:
#     bench/gpu/prepare_deps.sh                # here, once (needs the Debian packages)
#     bench/gpu/precision_check.sh             # on the GPU machine
#     bench/gpu/precision_check.sh --dry-run   # the same plumbing on the CPU with the
#                                              # existing build/ (no GPU, no .deps/ needed)
# Output: $OUT (or bench/gpu/out)/precision_check.log and summary.md (for docs/benchmarks.md).
set -euo pipefail

DRY_RUN=0
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${OUT:-$ROOT/bench/gpu/out}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/precision_check.log") 2>&1
START=$SECONDS
say() { printf '\n== [%3ds] %s\n' "$((SECONDS - START))" "$*"; }
fail() { printf 'precision_check: %s\n' "$*" >&2; exit 1; }

POLICIES=(fp32 tf32 amp_fp16 amp_bf16 custom_scaler)
DATA_ARGS=()
if ((DRY_RUN)); then
  # Plumbing only: a few steps and a slice of the test set (float16 on the CPU is slow).
  BUILD=${BUILD:-build}; DEVICE=cpu; STEPS=${STEPS:-5}
  DATA_ARGS=(data.val.limit=1000)
else
  BUILD=${BUILD:-build-gpu}; DEVICE=cuda; STEPS=${STEPS:-300}
  DEPS="$ROOT/.deps"
  [ -d "$DEPS" ] || fail "no .deps/: run bench/gpu/prepare_deps.sh where the Debian packages are, and carry .deps/"
  DATA_ARGS=(data.train.root="$DEPS/data/fashion-mnist" data.val.root="$DEPS/data/fashion-mnist")
fi

say "environment"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
if ((!DRY_RUN)); then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || fail "nvidia-smi failed"
  command -v nvcc >/dev/null || fail "nvcc not on PATH (TorchConfig needs the CUDA toolkit)"
  python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || fail "torch sees no GPU"
fi
echo "build dir: $BUILD, device: $DEVICE, steps per policy: $STEPS"

say "build"
# shellcheck source=targets.sh
source "$ROOT/bench/gpu/targets.sh"
TARGETS=("${PRECISION_TARGETS[@]}")
if ((!DRY_RUN)); then
  TARGETS+=(precision_cuda_check)
  # shellcheck source=configure.sh
  source "$ROOT/bench/gpu/configure.sh"
fi
cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}"
BIN="$BUILD/bin"

say "autocast dtypes on $DEVICE vs torch.autocast (fp16 and bf16)"
python3 tests/golden/make_autocast_golden.py --device "$DEVICE" > "$OUTDIR/autocast_$DEVICE.json"
MIXT_AUTOCAST_DEVICE=$DEVICE MIXT_AUTOCAST_GOLDEN="$OUTDIR/autocast_$DEVICE.json" "$BIN/test_autocast_parity"

say "GradScaler parity and policy tests (CPU, quick)"
"$BIN/test_grad_scaler_parity"
"$BIN/test_precision_policies"

if ((!DRY_RUN)); then
  say "tf32 really changes cuBLAS/cuDNN math"
  "$BIN/precision_cuda_check" | tee "$OUTDIR/tf32.md"
fi

say "training: $STEPS steps of Fashion-MNIST per policy on $DEVICE"
{
  echo "| policy | steps | skipped | final loss_scale | test accuracy | samples/s |"
  echo "|---|---|---|---|---|---|"
} > "$OUTDIR/training.md"
for policy in "${POLICIES[@]}"; do
  log="$OUTDIR/train_$policy.log"
  "$BIN/mixt" run recipes/fashion_mnist.yaml precision.name="$policy" trainer.device="$DEVICE" trainer.epochs=1 \
    trainer.max_steps_per_epoch="$STEPS" trainer.log_every=50 output="$OUTDIR/runs" "${DATA_ARGS[@]}" | tee "$log"
  done_line=$(grep '^done:' "$log")
  skipped=$(sed -n 's/.*(\([0-9]*\) skipped).*/\1/p' <<<"$done_line")
  rate=$(sed -n 's/.*(\([0-9.]*\) samples\/s).*/\1/p' <<<"$done_line")
  accuracy=$(sed -n 's/^test accuracy: \([0-9.]*%\).*/\1/p' "$log")
  scale=$(grep -o 'loss_scale [0-9.e+]*' "$log" | tail -1 | cut -d' ' -f2 || true)  # none for non-scaling policies
  echo "| $policy | $STEPS | $skipped | ${scale:--} | $accuracy | $rate |" >> "$OUTDIR/training.md"
done

say "summary"
{
  echo "precision_check on $DEVICE ($( ((DRY_RUN)) && echo dry run || nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), $(date -u +%Y-%m-%d)"
  echo
  [ -f "$OUTDIR/tf32.md" ] && ((!DRY_RUN)) && cat "$OUTDIR/tf32.md" && echo
  cat "$OUTDIR/training.md"
  echo
  echo "autocast dtypes on $DEVICE: equal to torch.autocast for every op of tests/golden/make_autocast_golden.py"
  echo "total: $((SECONDS - START)) s"
} | tee "$OUTDIR/summary.md"
