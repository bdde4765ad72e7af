#!/usr/bin/env bash
# Input-pipeline benchmark: decoded-and-augmented images/s of the standard ImageNet train
# pipeline (RandomResizedCrop 224, flip, to tensor, normalize), batch 256, 2 workers, one
# epoch over a generated ImageNet-style tree of 5,000 JPEGs (~400x350): mixt's image_folder
# loader vs torchvision's ImageFolder + DataLoader (PIL). Same machine, one run each; the
# files are read once first so both start from a warm page cache. Prints one table: wall
# clock images/s (the target), and images per CPU-second (user + system time of every
# thread and worker process), which stays meaningful when other jobs share the machine.
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
def per_cpu(r):
    return r["images"] / r["cpu_seconds"]
print(f"{'loader':<36}{'images':>7}{'seconds':>9}{'images/s':>10}{'cpu s':>8}{'images/cpu s':>14}")
for name, r in [("mixt image_folder (libjpeg-turbo)", m), ("torchvision ImageFolder (PIL)", t)]:
    print(f"{name:<36}{r['images']:>7}{r['seconds']:>9.2f}{r['images_per_second']:>10.1f}"
          f"{r['cpu_seconds']:>8.1f}{per_cpu(r):>14.1f}")
print(f"{'ratio mixt / torchvision':<36}{'':>7}{'':>9}{m['images_per_second'] / t['images_per_second']:>9.2f}x"
      f"{'':>8}{per_cpu(m) / per_cpu(t):>13.2f}x")
PY
