#!/usr/bin/env bash
# Fine-tuning memory and speed: mixt next to PEFT over PyTorch eager and torchtune's LoRA
# builders, on the same machine, one process each. llama3_2_1b's shape with random weights
# (bench/lora/make_base.py: a transformers folder; fewer layers with --layers), batch 1:
# full AdamW, LoRA (rank 16, alpha 32, q_proj and v_proj) and QLoRA (the same adapters over
# an NF4 base). Prints one table: peak RSS and tokens/s per row, and each peer's ratio to
# mixt's row of the same mode. Never fails on time.
#
#   bench/lora/run.sh [--layers 16] [--context 512] [--steps 3] [--warmup 1] [--modes full,lora,qlora]
#                     [--threads $(nproc)] [--out DIR]
#
# Run it on a quiet machine. Full AdamW at 16 layers needs ~22 GB (16 bytes a parameter).
set -euo pipefail
cd "$(dirname "$0")/../.."
MIXT=${MIXT:-build/bin/mixt}
LAYERS=16; CONTEXT=512; STEPS=3; WARMUP=1; MODES=full,lora,qlora; THREADS=$(nproc); OUT=""
while (($#)); do
  case "$1" in
    --layers) LAYERS=$2; shift 2 ;;
    --context) CONTEXT=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -n "$OUT" ]; then mkdir -p "$OUT"; out=$(cd "$OUT" && pwd); else out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi

echo "base: bench/lora/make_base.py $out --layers $LAYERS" >&2
python3 bench/lora/make_base.py "$out" --layers "$LAYERS" --tokens $(((STEPS + WARMUP + 2) * (CONTEXT + 1))) >&2
cat > "$out/finetune.yaml" <<YAML
name: finetune
task: { name: causal_lm }
model: { name: llama, from: "$out/base" }
adapter: { name: lora, rank: 16, alpha: 32, dropout: 0.0, targets: [q_proj, v_proj] }
precision: { name: fp32 }
optimizer: { name: adamw, lr: 2.0e-4 }
data:
  train: { name: tokens, files: "$out/tokens.bin", format: llmc, vocab: 128256, context: $CONTEXT, batch_size: 1, shuffle: false }
trainer: { epochs: 1, seed: 0, log_every: 1, threads: $THREADS }
callbacks: [{ name: tensorboard, enabled: false }]
YAML

: > "$out/rows.jsonl"
for mode in ${MODES//,/ }; do
  case "$mode" in
    full) overrides=(adapter=null) ;;
    lora) overrides=() ;;
    qlora) overrides=(adapter.quantize_base=nf4) ;;
    *) echo "--modes: full, lora, qlora, not '$mode'" >&2; exit 2 ;;
  esac
  echo "mixt: $mode" >&2
  if "$MIXT" bench "$out/finetune.yaml" --steps "$STEPS" --warmup "$WARMUP" output="$out/mixt-$mode" "${overrides[@]}" >&2; then
    python3 -c "import glob,json,sys; r=json.load(open(sorted(glob.glob('$out/mixt-$mode/*/*/bench.json'))[-1]))['results'][0]
print(json.dumps({'impl':'mixt','mode':'$mode','tokens_per_s':r['tokens_per_s'],'peak_rss_mib':r['peak_memory_mib'],'loss':r['loss']}))" >> "$out/rows.jsonl"
  else
    echo "{\"impl\": \"mixt\", \"mode\": \"$mode\", \"failed\": true}" >> "$out/rows.jsonl"
  fi
  case "$mode" in full) peers=(eager) ;; lora) peers=(peft torchtune) ;; qlora) peers=(torchtune) ;; esac
  for impl in "${peers[@]}"; do
    echo "$impl: $mode" >&2
    python3 bench/lora/peers.py "$out" --impl "$impl" --mode "$mode" --steps "$STEPS" --warmup "$WARMUP" \
      --context "$CONTEXT" --threads "$THREADS" >> "$out/rows.jsonl" ||
      echo "{\"impl\": \"$impl\", \"mode\": \"$mode\", \"failed\": true}" >> "$out/rows.jsonl"
  done
done

python3 - "$out" "$LAYERS" "$CONTEXT" "$STEPS" "$WARMUP" <<'PY'
import json, platform, subprocess, sys
out, layers, context, steps, warmup = sys.argv[1:]
rows = [json.loads(line) for line in open(f"{out}/rows.jsonl") if line.strip()]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
print(f"llama3_2_1b shape, {layers} layers, context {context}, batch 1, float32; {steps} timed steps after {warmup}; "
      f"{cpu}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores\n")
print("| mode | implementation | peak RSS (MiB) | tokens/s | loss | RSS vs mixt | tokens/s vs mixt |")
print("|---|---|---:|---:|---:|---:|---:|")
names = {"mixt": "mixt", "eager": "PyTorch eager (transformers)", "peft": "PEFT over PyTorch eager",
         "torchtune": "torchtune (lora_llama3_2, torchao NF4 for QLoRA)"}
for mode in ("full", "lora", "qlora"):
    mine = next((r for r in rows if r["impl"] == "mixt" and r["mode"] == mode and not r.get("failed")), None)
    for r in (r for r in rows if r["mode"] == mode):
        if r.get("failed"):
            print(f"| {mode} | {names[r['impl']]} | failed | | | | |")
            continue
        ratio = lambda key: f"{r[key] / mine[key]:.2f}" if mine else ""
        print(f"| {mode} | {names[r['impl']]} | {r['peak_rss_mib']:.0f} | {r['tokens_per_s']:.1f} | {r['loss']:.3f} | "
              f"{ratio('peak_rss_mib')} | {ratio('tokens_per_s')} |")
print("\nPEFT's QLoRA needs bitsandbytes' CUDA kernels: no PEFT row for qlora on a CPU.")
PY
