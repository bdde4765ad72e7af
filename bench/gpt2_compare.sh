#!/usr/bin/env bash
# GPT-2 124M (or, --model smollm2, a SmolLM2-135M-shaped Llama), mixt vs plain PyTorch
# (transformers' GPT2LMHeadModel or LlamaForCausalLM in eager mode, torch.autocast, AdamW) on
# the same machine, same torch, same random tokens, same batch and
# context, one policy per process on both sides. Prints one table: tokens/s (samples/s x
# context) and peak memory per side and the ratios mixt / PyTorch per policy, plus a row
# with activation checkpointing (mixt trainer.activation_checkpointing=all, transformers
# gradient_checkpointing_enable()) for each policy of --checkpointing (a comma-separated list),
# and a row with mixt's plain loss (task.fused_loss=false: the [tokens, vocab] logits whole,
# as PyTorch's) for each policy of --plain-loss. Never fails on time.
#
#   bench/gpt2_compare.sh [--device cpu|cuda] [--batch N] [--context T] [--steps N] [--warmup N]
#                         [--precision fp32,amp_bf16,...] [--checkpointing fp32|none] [--threads N]
#                         [--fused] [--model gpt2|smollm2] [--layers N] [--plain-loss fp32|none] [--out DIR]
#
# The recipe is recipes/gpt2/gpt2_124m.yaml (--model smollm2: recipes/llama/smollm2_135m.yaml, the
# same settings) (nanoGPT's settings: AdamW lr 6e-4, betas 0.9/0.95,
# weight decay 0.1 on 2-D weights, clipping at 1.0, no dropout) with, on both sides, the
# learning rate held constant (scheduler=null), one micro-batch per step (accumulate 1) and
# AdamW's default implementation for the device (--fused: the fused kernel on both sides).
# The tokens are uniform random ids below 50257 in nanoGPT's .bin format, written once with
# numpy into the output directory; mixt reads them through its `tokens` dataset, PyTorch
# slices the same file.
#
# --layers N (gpt2 only): the model's shape with N blocks instead of 12, on both sides (a
# quick check of the plumbing, as bench/gpu/run.sh --cpu makes).
#
# --out DIR keeps both sides' results there (mixt's bench.json and bench.md with the
# environment they were measured in, PyTorch's pytorch.jsonl, the table as compare.md);
# without it they go to a temporary directory that is removed.
#
# Defaults: on a GPU batch 8, 20 timed steps after 5, fp32,tf32,amp_fp16,amp_bf16,bf16_master
# (add fp8_tensorwise,fp8_rowwise on an H100/H200: bench/gpu/run.sh does); on the CPU batch 1,
# 3 after 1, fp32,amp_bf16,bf16_master,bf16_true (tf32 is fp32 on a CPU; a float16 step takes
# minutes there; float8 is emulated, about fp32's speed: add fp8_tensorwise,fp8_delayed,fp8_rowwise).
# PyTorch has no counterpart for fp8_delayed (an error row). docs/benchmarks.md has the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
MIXT=${MIXT:-build/bin/mixt}
DEVICE=""; BATCH=""; CONTEXT=1024; STEPS=""; WARMUP=""; THREADS=0; FUSED=false; PRECISION=""; OUT=""
CHECKPOINTING=fp32; PLAIN_LOSS=fp32; MODEL=gpt2; LAYERS=""
while (($#)); do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --context) CONTEXT=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --checkpointing) CHECKPOINTING=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --fused) FUSED=true; shift ;;
    --model) MODEL=$2; shift 2 ;;
    --layers) LAYERS=$2; shift 2 ;;
    --plain-loss) PLAIN_LOSS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -z "$DEVICE" ]; then
  DEVICE=$(python3 -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
fi
if [ "$DEVICE" = cuda ]; then
  BATCH=${BATCH:-8}; STEPS=${STEPS:-20}; WARMUP=${WARMUP:-5}; PRECISION=${PRECISION:-fp32,tf32,amp_fp16,amp_bf16,bf16_master}
else
  BATCH=${BATCH:-1}; STEPS=${STEPS:-3}; WARMUP=${WARMUP:-1}; PRECISION=${PRECISION:-fp32,amp_bf16,bf16_master,bf16_true}
fi
[ "$CHECKPOINTING" = none ] && CHECKPOINTING=""
[ "$PLAIN_LOSS" = none ] && PLAIN_LOSS=""
case "$MODEL" in
  gpt2) RECIPE=recipes/gpt2/gpt2_124m.yaml; VOCAB=50257; TITLE="GPT-2 124M" ;;
  smollm2) RECIPE=recipes/llama/smollm2_135m.yaml; VOCAB=49152; TITLE="SmolLM2-135M-shaped Llama" ;;
  *) echo "unknown --model $MODEL (gpt2, smollm2)" >&2; exit 2 ;;
esac
MIXT_LAYERS=(); TORCH_LAYERS=()
if [ -n "$LAYERS" ]; then
  [ "$MODEL" = gpt2 ] || { echo "--layers is for --model gpt2" >&2; exit 2; }
  MIXT_LAYERS=(model.num_layers="$LAYERS"); TORCH_LAYERS=(--layers "$LAYERS"); TITLE="GPT-2 124M's shape, $LAYERS layers"
fi

if [ -n "$OUT" ]; then
  mkdir -p "$OUT"; out=$(cd "$OUT" && pwd)
else
  out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
fi
# Enough windows for every step of both sides (mixt draws them shuffled, PyTorch in a
# permutation of its own), at least 64.
tokens="$out/tokens.bin"
python3 -c "
import numpy as np
windows = max(64, 2 * ($WARMUP + $STEPS) * $BATCH)
np.random.default_rng(0).integers(0, $VOCAB, size=windows * $CONTEXT + 1, dtype=np.uint16).tofile('$tokens')"

# mixt: its bench.json, or nothing when it wrote none (its messages are on stderr).
mixt_bench() {  # OUTPUT_DIR POLICIES [extra mixt bench flags]
  local dir=$1 policies=$2; shift 2
  "$MIXT" bench "$RECIPE" --precision "$policies" --steps "$STEPS" --warmup "$WARMUP" \
    --batch "$BATCH" "$@" trainer.device="$DEVICE" trainer.threads="$THREADS" output="$dir" \
    data.train.files="$tokens" data.train.context="$CONTEXT" model.context_length="$CONTEXT" \
    trainer.accumulate=1 scheduler=null optimizer.fused="$FUSED" 'callbacks=[]' "${MIXT_LAYERS[@]}" >&2 || true
  find "$dir" -name bench.json | head -n 1
}
torch_side() {  # POLICIES [extra flags]
  local policies=$1; shift
  python3 bench/gpt2_vs_pytorch.py --model "$MODEL" --tokens "$tokens" --precision "$policies" --device "$DEVICE" \
    --batch "$BATCH" --context "$CONTEXT" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" \
    $([ "$FUSED" = true ] && echo --fused) "${TORCH_LAYERS[@]}" "$@"
}

# The two sides take turns, policy by policy, so that a change in the machine's other load
# falls on both sides of a row rather than on one side of the table.
echo "mixt: $MIXT bench $RECIPE; PyTorch: bench/gpt2_vs_pytorch.py ($DEVICE, batch $BATCH x $CONTEXT, $STEPS steps after $WARMUP, fused AdamW: $FUSED)" >&2
tables=()
: > "$out/pytorch.jsonl"
IFS=, read -r -a policies <<< "$PRECISION"
for policy in "${policies[@]}"; do
  tables+=(--mixt "$(mixt_bench "$out/mixt-$policy" "$policy")")
  echo "PyTorch: $policy ..." >&2
  torch_side "$policy" >> "$out/pytorch.jsonl"
done
IFS=, read -r -a policies <<< "$CHECKPOINTING"
for policy in "${policies[@]}"; do
  tables+=(--mixt "$(mixt_bench "$out/mixt-$policy-checkpointing" "$policy" --activation-checkpointing all)")
  echo "PyTorch: $policy, gradient checkpointing ..." >&2
  torch_side "$policy" --checkpointing >> "$out/pytorch.jsonl"
done

IFS=, read -r -a policies <<< "$PLAIN_LOSS"
for policy in "${policies[@]}"; do
  tables+=(--mixt-plain "$(mixt_bench "$out/mixt-$policy-plain" "$policy" task.fused_loss=false)")
done

python3 bench/gpt2_compare_table.py "${tables[@]}" --pytorch "$out/pytorch.jsonl" --title "$TITLE" --device "$DEVICE" \
  --batch "$BATCH" --context "$CONTEXT" --steps "$STEPS" --warmup "$WARMUP" | tee "$out/compare.md"
if [ -n "$OUT" ]; then echo "results kept in $out" >&2; fi
