#!/usr/bin/env bash
# The largest batch that trains under a real memory limit, with and without activation
# checkpointing: each trial is `mixt bench` (one warm-up and one timed step of ResNet-50 on
# synthetic 224x224 data) inside a memory cgroup of --limit-mib; a trial fits when its step
# completes, and does not when the kernel's OOM killer or the allocator stops it. Doubling
# from --start, then bisection to --granularity. Needs root (a cgroup v1 or v2 memory
# controller under /sys/fs/cgroup). Prints one table, the ratio to the `none` row.
#
#   bench/memory/largest_batch.sh [--limit-mib 4096] [--model resnet50|vit_b_16]
#       [--precision fp32] [--settings none,all] [--start 8] [--granularity 4] [--max 1024]
set -euo pipefail
cd "$(dirname "$0")/../.."
MIXT=${MIXT:-build/bin/mixt}
LIMIT_MIB=4096; MODEL=resnet50; PRECISION=fp32; SETTINGS=none,all; START=8; GRANULARITY=4; MAX=1024
while (($#)); do
  case "$1" in
    --limit-mib) LIMIT_MIB=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --settings) SETTINGS=$2; shift 2 ;;
    --start) START=$2; shift 2 ;;
    --granularity) GRANULARITY=$2; shift 2 ;;
    --max) MAX=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

# One cgroup for every trial; cgroup v2 has cgroup.controllers at its root.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  group=/sys/fs/cgroup/mixt-largest-batch-$$
  mkdir "$group"
  echo $((LIMIT_MIB * 1024 * 1024)) > "$group/memory.max"
  echo 0 > "$group/memory.swap.max" 2>/dev/null || true
else
  group=/sys/fs/cgroup/memory/mixt-largest-batch-$$
  mkdir "$group"
  echo $((LIMIT_MIB * 1024 * 1024)) > "$group/memory.limit_in_bytes"
  echo $((LIMIT_MIB * 1024 * 1024)) > "$group/memory.memsw.limit_in_bytes" 2>/dev/null || true
fi
out=$(mktemp -d)
trap 'rmdir "$group" 2>/dev/null || true; rm -rf "$out"' EXIT

model_override=()
[ "$MODEL" = resnet50 ] || model_override=("model={name: $MODEL}" "data.train.channels_last=false")

# Whether `batch` trains under the limit with activation checkpointing `setting`.
fits() {
  local batch=$1 setting=$2 dir="$out/$2-$1"
  # The trial joins the cgroup first, so mixt and its bench worker are both inside it.
  if ! bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$group" \
      "$MIXT" bench recipes/resnet50/synthetic.yaml --precision "$PRECISION" --steps 1 --warmup 1 \
      --batch "$batch" trainer.device=cpu trainer.activation_checkpointing="$setting" output="$dir" scheduler=null \
      data.train.size="$((batch * 2))" "${model_override[@]}" > "$dir.log" 2>&1; then
    return 1
  fi
  python3 - "$dir" <<'PY'
import glob, json, sys
results = json.load(open(sorted(glob.glob(f"{sys.argv[1]}/*/*/bench.json"))[-1]))["results"]
sys.exit(0 if results and "error" not in results[0] else 1)
PY
}

largest() {
  local setting=$1 good=0 bad=0 batch=$START
  while ((batch <= MAX)); do
    if fits "$batch" "$setting"; then good=$batch; batch=$((batch * 2)); else bad=$batch; break; fi
    echo "  $setting: batch $good fits" >&2
  done
  ((bad == 0)) && { echo "$good+"; return; }
  while ((bad - good > GRANULARITY)); do
    local mid=$(((good + bad) / 2 / GRANULARITY * GRANULARITY))
    ((mid <= good)) && mid=$((good + GRANULARITY))
    if fits "$mid" "$setting"; then good=$mid; else bad=$mid; fi
    echo "  $setting: between $good and $bad" >&2
  done
  echo "$good"
}

echo "$MODEL, $PRECISION, memory limit $LIMIT_MIB MiB ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(nproc) cores), $(date -u +%F)"
echo
echo "| activation checkpointing | largest batch | / none |"
echo "|---|---:|---:|"
base=""
for setting in ${SETTINGS//,/ }; do
  n=$(largest "$setting")
  [ -z "$base" ] && base=${n%+}
  echo "| $setting | $n | $(python3 -c "print(f'{${n%+} / max($base, 1):.2f}')") |"
done
