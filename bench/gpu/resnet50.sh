#!/usr/bin/env bash
# ResNet-50 on a CUDA machine, in one prepared script, within 8 minutes on one
# H200: builds mixt against the machine's torch 2.11.0+cu130 with the dependencies carried
# in .deps/ (bench/gpu/prepare_deps.sh, run where the Debian packages are), then runs
# bench/resnet50_compare.sh: mixt and plain PyTorch, batch 256, channels_last, synthetic
# data, fp32 / tf32 / amp_fp16 / amp_bf16, one table with the ratios.
#     bench/gpu/prepare_deps.sh      # here, once
#     bench/gpu/resnet50.sh          # on the GPU machine, from the repository root
# Output: $OUT (or bench/gpu/out)/resnet50.log and resnet50.md (for docs/benchmarks.md).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${OUT:-$ROOT/bench/gpu/out}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/resnet50.log") 2>&1
DEPS="$ROOT/.deps"
BUILD=${BUILD:-build-gpu}
[ -d "$DEPS" ] || { echo "resnet50: no .deps/: run bench/gpu/prepare_deps.sh where the Debian packages are" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
date -u

# shellcheck source=configure.sh
source "$ROOT/bench/gpu/configure.sh"
# shellcheck source=targets.sh
source "$ROOT/bench/gpu/targets.sh"
cmake --build "$BUILD" -j "$(nproc)" --target "${RESNET50_TARGETS[@]}"

MIXT="$BUILD/bin/mixt" timeout 360 bench/resnet50_compare.sh --device cuda --batch "${BATCH:-256}" \
  --steps "${STEPS:-30}" --warmup "${WARMUP:-10}" --out "$OUTDIR/resnet50" | tee "$OUTDIR/resnet50.md"
# Stretch goal: the fused SGD kernel (at::_fused_sgd_) on both sides, AMP only.
MIXT="$BUILD/bin/mixt" timeout 90 bench/resnet50_compare.sh --device cuda --batch "${BATCH:-256}" \
  --steps "${STEPS:-30}" --warmup "${WARMUP:-10}" --precision amp_fp16,amp_bf16 --fused --out "$OUTDIR/resnet50_fused" \
  | tee "$OUTDIR/resnet50_fused.md" || true
