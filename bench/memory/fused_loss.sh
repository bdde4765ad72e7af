#!/usr/bin/env bash
# Peak memory of a training step with causal_lm's fused loss and with the plain one, at
# context 1024 and the vocabularies of GPT-2 (50,257) and Llama 3 (128,256): `mixt bench`
# (one warm-up and --steps timed steps, AdamW, fp32 unless --precision) of a small gpt2
# (2 blocks of width 768, so that the head's logits are what differs) on random tokens. Also
# beside it: transformers' GPT2LMHeadModel of the same size in PyTorch eager, whose loss is
# the plain one. Prints one table, each fused row's ratio to its plain row. Never fails on
# time.
#
#   bench/memory/fused_loss.sh [--batch 1] [--context 1024] [--vocabs 50257,128256]
#                              [--precision fp32] [--steps 2] [--threads 0]
set -euo pipefail
cd "$(dirname "$0")/../.."
MIXT=${MIXT:-build/bin/mixt}
BATCH=1; CONTEXT=1024; VOCABS=50257,128256; PRECISION=fp32; STEPS=2; THREADS=0
while (($#)); do
  case "$1" in
    --batch) BATCH=$2; shift 2 ;;
    --context) CONTEXT=$2; shift 2 ;;
    --vocabs) VOCABS=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
echo "mixt bench, gpt2 2 x 768, batch $BATCH x $CONTEXT, $PRECISION, $STEPS steps after 1 ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
echo "| vocabulary | loss | peak RSS MiB | fused / plain | tokens/s | logits of a step, float32 MiB |"
echo "|---:|---|---:|---:|---:|---:|"
IFS=, read -r -a vocabs <<< "$VOCABS"
for vocab in "${vocabs[@]}"; do
  # uint32 ids (llm.c's version 7 header) once the vocabulary passes 65,536.
  python3 - "$out/tokens-$vocab.bin" "$vocab" "$CONTEXT" "$BATCH" "$STEPS" <<'PY'
import sys
import numpy as np
path, vocab, context, batch, steps = sys.argv[1], *map(int, sys.argv[2:])
count = max(64, 2 * (steps + 1) * batch) * context + 1
ids = np.random.default_rng(0).integers(0, vocab, size=count)
header = np.zeros(256, dtype=np.int32)
wide = vocab > 65536
header[0], header[1], header[2] = (20240801, 7, count) if wide else (20240520, 1, count)
with open(path, "wb") as f:
    f.write(header.tobytes())
    f.write(ids.astype(np.uint32 if wide else np.uint16).tobytes())
PY
  plain_peak=""
  for fused in false true; do
    dir="$out/$vocab-$fused"
    "$MIXT" bench recipes/gpt2/gpt2_124m.yaml --precision "$PRECISION" --steps "$STEPS" --warmup 1 --batch "$BATCH" \
      output="$dir" model.num_layers=2 model.vocab_size="$vocab" model.context_length="$CONTEXT" \
      data.train.files="$out/tokens-$vocab.bin" data.train.context="$CONTEXT" data.train.vocab="$vocab" data.train.workers=0 \
      trainer.accumulate=1 trainer.threads="$THREADS" scheduler=null task.fused_loss="$fused" 'callbacks=[]' \
      > "$dir.log" 2>&1 || true
    json=$(find "$dir" -name bench.json | head -n 1)
    python3 - "$json" "$vocab" "$fused" "$plain_peak" "$BATCH" "$CONTEXT" <<'PY' > "$dir.row"
import json, sys
path, vocab, fused, plain, batch, context = sys.argv[1:]
logits = int(batch) * int(context) * int(vocab) * 4 / 2**20
try:
    row = json.load(open(path))["results"][0]
    peak = row["peak_memory_mib"]
    tokens = row.get("tokens_per_s") or row["images_per_s"] * int(context)
    ratio = f"{peak / float(plain):.2f}" if plain else "1"
    print(f"| {int(vocab):,} | {'fused' if fused == 'true' else 'plain'} | {peak:.0f} | {ratio} | {tokens:.0f} | {logits:.0f} |")
except Exception as e:
    print(f"| {int(vocab):,} | {'fused' if fused == 'true' else 'plain'} | failed: {e} | | | |")
PY
    cat "$dir.row"
    if [ "$fused" = false ]; then
      plain_peak=$(python3 -c "import json,sys; print(json.load(open('$(find "$dir" -name bench.json | head -n 1)'))['results'][0]['peak_memory_mib'])" 2>/dev/null || echo "")
    fi
  done
done
echo "peak RSS: the whole process (LibTorch, the model, AdamW's state, the data), as mixt bench reports it on the CPU"
