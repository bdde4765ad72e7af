#!/usr/bin/env bash
# Input-pipeline benchmark: decoded-and-augmented images/s of the standard ImageNet train
# pipeline (RandomResizedCrop 224, flip, to tensor, normalize), batch 256, 2 workers, one
# epoch over a generated ImageNet-style tree of 5,000 JPEGs (~400x350): mixt's image_folder
# loader vs torchvision's ImageFolder + DataLoader (PIL). Same machine, one run each; the
# files are read once first so both start from a warm page cache. Prints one table.
#
# usage: bench/data_pipeline/run.sh [BUILD_DIR=build] [TREE_DIR=BUILD_DIR/bench/imagenet_tree]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
tree="${2:-$build/bench/imagenet_tree}"
batch=256
workers=2
exe="$build/bin/mixt_bench_data_pipeline"
[ -x "$exe" ] || { echo "build first: cmake --build $build --target mixt_bench_data_pipeline" >&2; exit 2; }

python3 "$here/make_tree.py" "$tree"
find "$tree" -name '*.JPEG' -exec cat {} + > /dev/null  # warm the page cache

load=$(cut -d' ' -f1 /proc/loadavg)
mixt_json=$("$exe" "$tree" "$batch" "$workers")
torch_json=$(python3 "$here/torchvision_loader.py" "$tree" --batch-size "$batch" --workers "$workers")
python3 - "$mixt_json" "$torch_json" "$load" "$(nproc)" <<'PY'
import json, sys
m, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"input pipeline: ImageNet train transforms, batch 256, 2 workers, {m['images']} JPEGs "
      f"(load average {sys.argv[3]} on {sys.argv[4]} cores before the run)")
print(f"{'loader':<34}{'images':>8}{'seconds':>10}{'images/s':>11}")
print(f"{'mixt image_folder (OpenCV)':<34}{m['images']:>8}{m['seconds']:>10.2f}{m['images_per_second']:>11.1f}")
print(f"{'torchvision ImageFolder (PIL)':<34}{t['images']:>8}{t['seconds']:>10.2f}{t['images_per_second']:>11.1f}")
print(f"{'ratio mixt / torchvision':<34}{'':>8}{'':>10}{m['images_per_second'] / t['images_per_second']:>10.2f}x")
PY
