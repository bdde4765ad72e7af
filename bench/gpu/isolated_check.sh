#!/usr/bin/env bash
# Pre-flight for the GPU session, on this CPU machine: does the working tree plus .deps/
# build and run where the Debian development packages are absent (the GPU machine has
# torch, cmake, ninja and nvcc, but no yaml-cpp, Boost, nlohmann/json, CLI11, GTest, Gloo
# headers, zlib headers or Fashion-MNIST)? `precision_check.sh --dry-run` cannot tell: it
# reuses build/, which found all of those in /usr. Device time is scarce; this is free.
#
# Copies what `run` would carry (tracked and untracked-not-ignored files, and .deps/) to a
# scratch directory, hides the Debian packages in a private mount namespace (needs root:
# unshare -m), configures with bench/gpu/configure.sh, builds every GPU target, then runs
# the CPU halves of the GPU parts: the GradScaler parity test, 20 Fashion-MNIST steps on the
# carried data, one ResNet-50 bench step, and a world-size-1 torchrun run (Gloo: no GPU).
#     bench/gpu/prepare_deps.sh && bench/gpu/isolated_check.sh     # ~4 min with a warm ccache
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SIM=${SIM:-/tmp/mixt-isolated-check}
[ -d "$ROOT/.deps" ] || { echo "isolated_check: no .deps/: run bench/gpu/prepare_deps.sh first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "isolated_check: needs root (a private mount namespace hides /usr packages)" >&2; exit 1; }

rm -rf "$SIM" && mkdir -p "$SIM"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$SIM"
cp -a "$ROOT/.deps" "$SIM/"

exec unshare -m bash -euo pipefail -c '
  A=/usr/lib/x86_64-linux-gnu
  for d in /usr/include/yaml-cpp /usr/include/boost /usr/include/nlohmann /usr/include/CLI /usr/include/gtest \
           /usr/include/gmock /usr/include/gloo /usr/include/opencv4 /usr/include/spdlog /usr/include/fmt \
           $A/cmake /usr/lib/cmake /usr/share/cmake/CLI11 /usr/share/datasets; do
    if [ -e "$d" ]; then mount -t tmpfs none "$d"; fi
  done
  # Bind over files (not the runtime libz.so.1 that cmake itself needs); a link is followed,
  # so libyaml-cpp.so hides the real library too, as on the GPU machine.
  for f in /usr/include/zlib.h /usr/include/zconf.h $A/libyaml-cpp.so* $A/libgtest* $A/libgmock*; do
    if [ -e "$f" ]; then mount --bind /dev/null "$f"; fi
  done
  cd "$0"
  ROOT=$PWD DEPS=$PWD/.deps BUILD=build-gpu
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  source bench/gpu/configure.sh
  source bench/gpu/targets.sh
  echo "== build (Debian development packages hidden)"
  cmake --build "$BUILD" -j "$(nproc)" --target "${PRECISION_TARGETS[@]}" "${RESNET50_TARGETS[@]}" precision_cuda_check
  ldd "$BUILD/bin/mixt" | grep -E "yaml-cpp|not found"
  DATA=(data.train.root=$DEPS/data/fashion-mnist data.val.root=$DEPS/data/fashion-mnist data.val.limit=500)
  echo "== GradScaler parity";   "$BUILD/bin/test_grad_scaler_parity" | tail -1
  echo "== Fashion-MNIST";       "$BUILD/bin/mixt" run recipes/fashion_mnist.yaml trainer.device=cpu trainer.epochs=1 \
                                   trainer.max_steps_per_epoch=20 output=$PWD/runs "${DATA[@]}" | tail -2
  echo "== ResNet-50 bench";     "$BUILD/bin/mixt" bench recipes/resnet50/synthetic.yaml --precision fp32 --steps 1 \
                                   --warmup 0 --batch 2 output=$PWD/runs | grep "^| fp32"
  echo "== torchrun, world size 1 (Gloo here, NCCL on the GPU)"
  timeout 120 torchrun --no-python --nproc-per-node=1 "$BUILD/bin/mixt" run recipes/fashion_mnist.yaml \
    trainer.device=cpu trainer.distributed.backend=gloo trainer.distributed.sync_batchnorm=true model.batch_norm=true \
    trainer.epochs=1 trainer.max_steps_per_epoch=20 output=$PWD/runs "${DATA[@]}" 2>&1 | tail -2
  echo "isolated_check: the working tree and .deps/ build and run without the Debian packages"
' "$SIM"
