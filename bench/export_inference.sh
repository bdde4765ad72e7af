#!/bin/bash
# ResNet-50 inference from mixt export's files: exports recipes/resnet50/synthetic.yaml's model
# (seed-0 weights; the speed does not depend on them) to ONNX, TorchScript and safetensors,
# then times them, and `mixt predict` on the same weights, against PyTorch eager
# (bench/export_inference.py). Usage: [THREADS] (2) [SECONDS per measurement] (10).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mixt=${MIXT:-$here/../build/bin/mixt}
threads=${1:-2}
seconds=${2:-10}
recipe=$here/../recipes/resnet50/synthetic.yaml
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for file in resnet50.onnx resnet50.pt resnet50.safetensors; do
  "$mixt" export "$recipe" -o "$out/$file" >/dev/null 2>&1
done
lscpu | grep -m1 "Model name" || true
"${PYTHON:-python3}" "$here/export_inference.py" "$out/resnet50.onnx" "$out/resnet50.pt" "$out/resnet50.safetensors" \
  "$threads" "$seconds" "$mixt" "$recipe"
