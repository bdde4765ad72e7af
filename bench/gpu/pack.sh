#!/usr/bin/env bash
# Packs everything the H200 run needs into one folder, built here: the GPU machine compiles
# nothing, so its minutes go to measuring. After `make build`, from anywhere:
#     bench/gpu/pack.sh [PACK]        # default bench/gpu/pack (git-ignored); under 64 MiB
# then on the GPU machine, from the repository root (device run, carry ["bench/gpu/pack"]):
#     bash bench/gpu/pack/run.sh      # figures under $OUT as each part finishes
# Layout: bin/ (mixt, the parity test binaries, precision_cuda_check), lib/ (libmixt and the
# non-torch libraries they load), lib/mixt/plugins/ (the plugins the run uses; not
# image_folder, whose OpenCV would bring ~100 libraries), data/fashion-mnist/, and the
# recipes, scripts and goldens the run reads, in the repository's own layout. It runs from
# any directory with LD_LIBRARY_PATH set to that machine's torch/lib and the pack's lib/,
# which run.sh sets (the binaries' RUNPATH names this machine's paths; LD_LIBRARY_PATH comes
# first).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
PACK=${1:-$ROOT/bench/gpu/pack}
PLUGINS=(precision_fp32 precision_tf32 precision_amp_fp16 precision_amp_bf16 precision_custom_scaler
         optimizer_sgd optimizer_adamw scheduler_cosine model_simple_cnn model_resnet dataset_fashion_mnist
         dataset_synthetic dataset_cifar10 callback_tensorboard callback_ema precision_bf16_master
         precision_fp16_master precision_bf16_true precision_fp8_tensorwise precision_fp8_delayed precision_fp8_rowwise
         model_vit task_classification task_causal_lm model_gpt2 dataset_tokens)
BINARIES=(mixt test_autocast_parity test_grad_scaler_parity test_sync_free_step test_precision_policies
          test_float8 precision_cuda_check)
FILES=(bench/gpu/run.sh bench/resnet50_compare.sh bench/resnet50_compare_table.py bench/resnet50_vs_pytorch.py
       recipes/fashion_mnist.yaml recipes/fashion_mnist_fp8.yaml recipes/resnet50 tests/golden/make_autocast_golden.py
       tests/golden/autocast_dtypes.json tests/golden/grad_scaler.json tests/golden/grad_scaler_fused.json
       tests/golden/grad_scaler_device.json tests/fixtures/data/make_cifar10.py bench/gpt2_compare.sh
       bench/gpt2_compare_table.py bench/gpt2_vs_pytorch.py recipes/gpt2/gpt2_124m.yaml)
DATA=${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}

for b in "${BINARIES[@]}"; do
  [ -x "$BUILD/bin/$b" ] || { echo "pack: $BUILD/bin/$b is missing: make build first" >&2; exit 1; }
done
rm -rf "$PACK"
mkdir -p "$PACK/bin" "$PACK/lib/mixt/plugins" "$PACK/data"
for b in "${BINARIES[@]}"; do cp "$BUILD/bin/$b" "$PACK/bin/"; done
cp -L "$BUILD/lib/libmixt.so" "$PACK/lib/"
for p in "${PLUGINS[@]}"; do cp "$BUILD/lib/mixt/plugins/libmixt_$p.so" "$PACK/lib/mixt/plugins/"; done
(cd "$ROOT" && tar -cf - "${FILES[@]}") | tar -xf - -C "$PACK"
mv "$PACK/bench/gpu/run.sh" "$PACK/run.sh"
cp -r "$DATA" "$PACK/data/fashion-mnist"

# The libraries they load that the GPU machine has of its own: torch's (its torch/lib), the
# CUDA driver's, and the C and C++ runtimes of every Linux. The rest comes along.
TORCH_LIB=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
for f in "$PACK"/bin/* "$PACK"/lib/*.so "$PACK"/lib/mixt/plugins/*.so; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$lib" in
    "$TORCH_LIB"/* | */nvidia/* | */cuda/* | "$BUILD"/* | "$PACK"/*) continue ;;
    */libc.so.* | */libm.so.* | */libstdc++.so.* | */libgcc_s.so.* | */ld-linux* | */libpthread.so.* | \
      */libdl.so.* | */librt.so.* | */libutil.so.*) continue ;;
  esac
  cp -L "$lib" "$PACK/lib/"
done

size=$(du -sm "$PACK" | cut -f1)
echo "pack: $PACK, ${size} MiB: $(ls "$PACK/bin" | tr '\n' ' ')"
[ "$size" -lt 60 ] || { echo "pack: ${size} MiB leaves no room under the device's 64 MiB" >&2; exit 1; }
