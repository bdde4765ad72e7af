#!/usr/bin/env bash
# The GPU pack, checked on this CPU machine as the GPU machine will see it: packed, moved to
# a scratch directory, and run (run.sh --cpu: every part, CPU-sized) with the Debian
# packages' libraries, the dataset package and the build's own lib/ hidden in a private
# mount namespace, so that anything the pack lacks fails here. Needs root (unshare -m);
# exit 77 otherwise. The test suite runs it as GpuPack.RunsOnTheCpuWithoutTheBuild.
#     bench/gpu/pack_check.sh [BUILD]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
[ "$(id -u)" = 0 ] || { echo "pack_check: needs root (a private mount namespace hides /usr packages)"; exit 77; }
# Root inside a container usually lacks CAP_SYS_ADMIN, and with it the mount namespace.
unshare -m true 2>/dev/null || { echo "pack_check: cannot make a private mount namespace here (unshare -m)"; exit 77; }
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
BUILD=$BUILD bash "$ROOT/bench/gpu/pack.sh" "$SCRATCH/made"
mv "$SCRATCH/made" "$SCRATCH/elsewhere"  # nothing may point back at where it was made

unshare -m bash -euo pipefail -c '
  PACK=$0 BUILD=$1
  A=/usr/lib/x86_64-linux-gnu
  for f in $A/libyaml-cpp.so* $A/libprotobuf-lite.so*; do [ -e "$f" ] && mount --bind /dev/null "$f"; done
  for d in /usr/share/datasets "$BUILD/lib"; do [ -d "$d" ] && mount -t tmpfs none "$d"; done
  OUT=$PACK/out bash "$PACK/run.sh" --cpu
  echo "== pack_check"
  if grep -E ": exit [1-9]" "$PACK/out/parts.log"; then echo "pack_check: a part failed (above)"; exit 1; fi
  for f in environment.txt autocast.log grad_scaler.log fashion_mnist_fp32.log fashion_mnist_fp8_tensorwise.log fashion_mnist_fp8_delayed.log fashion_mnist_fp8_rowwise.log float8_rowwise_cuda.log resnet50.md memory.md checkpointing.md torchrun.log callbacks.log loader.log gpt2.md sharding_parameters.log; do
    [ -s "$PACK/out/$f" ] || { echo "pack_check: $f is missing or empty"; exit 1; }
  done
  grep -q "^| fp32" "$PACK/out/resnet50.md" || { echo "pack_check: no fp32 row in resnet50.md"; exit 1; }
  grep -q "^| fp32 | all" "$PACK/out/checkpointing.md" || { echo "pack_check: no checkpointed row in checkpointing.md"; exit 1; }
  grep -q "^| fp32 | none | fused | [0-9]" "$PACK/out/gpt2.md" || { echo "pack_check: no measured fp32 row in gpt2.md"; exit 1; }
  grep -q "^| fp32 | all | fused | [0-9]" "$PACK/out/gpt2.md" || { echo "pack_check: no checkpointed row in gpt2.md"; exit 1; }
  grep -q "blocks. weights were whole at once" "$PACK/out/sharding_parameters.log" || { echo "pack_check: the ZeRO-3 run did not train"; exit 1; }
  echo "pack_check: the pack runs every part with the build and the Debian libraries out of reach"
' "$SCRATCH/elsewhere" "$BUILD"
