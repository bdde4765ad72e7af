#!/usr/bin/env bash
# The H200 run, from the pack bench/gpu/pack.sh makes (this file is its run.sh): every GPU
# figure in one command of at most 9 minutes, nothing compiled. Each part has its own time
# limit and writes its figures under $OUT as it finishes, so a part that times out costs
# only itself. On the GPU machine, from the repository root:
#     bash bench/gpu/pack/run.sh            # device run: carry ["bench/gpu/pack"], timeout_s 590
#     bash bench/gpu/pack/run.sh --cpu      # the same plumbing on a CPU, in minutes (pack_check.sh)
# Parts: nvidia-smi; autocast dtypes on CUDA vs torch.autocast op by op; tf32 vs fp32
# cuBLAS/cuDNN math; GradScaler parity; Fashion-MNIST per policy; ResNet-50 batch 256
# channels_last, mixt vs PyTorch eager, a row per policy (images/s, p50/p95, allocator
# peak); the same with activation checkpointing; float8 (fp8_rowwise's CUDA matmuls vs its CPU emulation,
# Fashion-MNIST, ViT-B/16 amp_bf16 vs bf16_master vs fp8_tensorwise vs fp8_rowwise); NCCL at world size 1 under torchrun, on the pinned-memory loader path;
# sharded data parallel over NCCL, 2 ranks under each trainer.distributed.sharding (only where the
# machine has 2 GPUs: NCCL needs one a rank);
# last, GPT-2 124M batch 8 x 1024 random tokens, mixt vs transformers' GPT2LMHeadModel in eager
# PyTorch, a row per policy, fp32 with activation checkpointing and fp32 with the plain loss (not
# the fused one; bench/gpt2_compare.sh; its
# own limit of 200 s, ~3 min: run last so that it can cost only itself; GPT2=0 skips it, and
# GPT2=only runs it alone, for a second device call when the first ran out of time).
set -uo pipefail
PACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CPU=0
[ "${1:-}" = "--cpu" ] && CPU=1
OUT=${OUT:-$PACK/out}
mkdir -p "$OUT"
TORCH_LIB=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$PACK/lib:$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MIXT_TEST_SOURCE_DIR=$PACK MIXT_TEST_PLUGIN_DIR=$PACK/lib/mixt/plugins
cd "$PACK"
START=$SECONDS
# The whole command ends within BUDGET seconds (the device call's limit less a margin): each
# part's own limit is cut to what is left, so a slow part costs the ones after it their time
# (named "out of time" in parts.log), never the call.
BUDGET=${BUDGET:-$((CPU ? 100000 : 530))}
left() { echo $((BUDGET - (SECONDS - START))); }
# (timeout 0 would mean none: a part past the budget gets a tenth of a second.)
within() { local left; left=$(left); ((left >= 1)) && echo $(($1 < left ? $1 : left)) || echo 0.1; }
part() { printf '\n#### [%3ds] %s\n' "$((SECONDS - START))" "$*" | tee -a "$OUT/parts.log"; }
ended() {
  local why=""
  [ "$2" = 124 ] && (($(left) <= 1)) && why=" (out of time: the run's ${BUDGET} s were spent)"
  echo "$1: exit $2$why" | tee -a "$OUT/parts.log"
}
DATA=(data.train.root="$PACK/data/fashion-mnist" data.val.root="$PACK/data/fashion-mnist")
if ((CPU)); then
  DEVICE=cpu; STEPS=5; BATCH=2; BENCH_STEPS=1; BENCH_WARMUP=0; POLICIES=(fp32 amp_bf16); BACKEND=gloo
  MEMORY_POLICIES=fp32,bf16_master
  CHECKPOINTING_POLICIES=fp32
  # The plumbing only: the policies' own tests hold their numbers. A 64x64 image keeps the
  # two ResNet-50 bench parts to seconds; the comparison keeps 224x224 (PyTorch's side has it).
  RESNET_POLICIES=fp32; RESNET_SMALL=(data.train.shape=[3,64,64]); SHARDED_MODES=(none parameters)
  # GPT-2 124M on two CPU cores: a short context and one step, the plumbing only.
  GPT2_BATCH=1; GPT2_CONTEXT=128; GPT2_STEPS=1; GPT2_WARMUP=0; GPT2_POLICIES=fp32; GPT2_LAYERS=(--layers 2)
  DATA+=(data.val.limit=500)
  # The sharded runs: a 2-layer GPT-2 of width 64, the plumbing only.
  SHARDED_RANKS=2; SHARDED=(model.num_layers=2 model.num_heads=2 model.hidden_dim=64 model.context_length=64
    data.train.context=64 data.val.context=64 data.train.batch_size=2 data.val.batch_size=2 optimizer.fused=false)
  SHARDED_STEPS=3
else
  DEVICE=cuda; STEPS=300; BATCH=256; BENCH_STEPS=30; BENCH_WARMUP=10; POLICIES=(fp32 tf32 amp_fp16 amp_bf16 custom_scaler)
  MEMORY_POLICIES=fp32,amp_fp16,amp_bf16,bf16_master,fp16_master,bf16_true
  CHECKPOINTING_POLICIES=fp32,amp_bf16,bf16_master
  RESNET_POLICIES=fp32,tf32,amp_fp16,amp_bf16; RESNET_SMALL=(); SHARDED_MODES=(none optimizer gradients parameters)
  # The PyTorch side's float8 rows need torchao, which the machine's image lacks (error rows
  # unless it is carried as a wheel); mixt's float8 rows are measured all the same.
  GPT2_BATCH=8; GPT2_CONTEXT=1024; GPT2_STEPS=10; GPT2_WARMUP=3
  GPT2_POLICIES=fp32,tf32,amp_fp16,amp_bf16,fp8_tensorwise,fp8_rowwise; GPT2_LAYERS=()
  BACKEND=nccl
  SHARDED_RANKS=$(python3 -c 'import torch; print(min(torch.cuda.device_count(), 2))')
  SHARDED=(data.train.batch_size=8 data.val.batch_size=8)
  SHARDED_STEPS=20
fi

part "environment"
{
  date -u
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
  ((CPU)) || timeout -k 10 "$(within 20)" nvidia-smi
  bin/mixt --version
} 2>&1 | tee "$OUT/environment.txt"

gpt2_part() {
  part "GPT-2 124M, batch $GPT2_BATCH x $GPT2_CONTEXT, random tokens: mixt vs PyTorch eager (transformers)"
  MIXT=bin/mixt timeout -k 10 "$(within $((CPU ? 240 : 200)))" bash bench/gpt2_compare.sh --device "$DEVICE" --batch "$GPT2_BATCH" \
    --context "$GPT2_CONTEXT" --steps "$GPT2_STEPS" --warmup "$GPT2_WARMUP" --precision "$GPT2_POLICIES" "${GPT2_LAYERS[@]}" \
    --checkpointing fp32 --plain-loss "$( ((CPU)) && echo none || echo fp32)" --out "$OUT/gpt2" > "$OUT/gpt2.md" 2>&1
  ended gpt2 $?; grep -E "^GPT-2|^\| |without" "$OUT/gpt2.md"
}
if [ "${GPT2:-1}" = only ]; then gpt2_part; part "done"; exit 0; fi

part "autocast dtypes on $DEVICE vs torch.autocast"
timeout -k 10 "$(within 90)" python3 tests/golden/make_autocast_golden.py --device "$DEVICE" > "$OUT/autocast_$DEVICE.json" &&
  MIXT_AUTOCAST_DEVICE=$DEVICE MIXT_AUTOCAST_GOLDEN="$OUT/autocast_$DEVICE.json" timeout -k 10 "$(within 60)" bin/test_autocast_parity \
    > "$OUT/autocast.log" 2>&1
ended autocast $?; tail -1 "$OUT/autocast.log"

if ((!CPU)); then
  part "tf32 changes cuBLAS/cuDNN math; fp32 is bit-plain float32"
  timeout -k 10 "$(within 60)" bin/precision_cuda_check 2>&1 | tee "$OUT/tf32.md"
  ended tf32 "${PIPESTATUS[0]}"
fi

part "GradScaler parity and the policies' tests"
{ timeout -k 10 "$(within 60)" bin/test_grad_scaler_parity && timeout -k 10 "$(within 60)" bin/test_sync_free_step &&
  timeout -k 10 "$(within 120)" bin/test_precision_policies; } > "$OUT/grad_scaler.log" 2>&1
ended grad_scaler $?; grep -E "PASSED|FAILED" "$OUT/grad_scaler.log"

part "Fashion-MNIST, $STEPS steps per policy on $DEVICE"
for policy in "${POLICIES[@]}"; do
  timeout -k 10 "$(within 60)" bin/mixt run recipes/fashion_mnist.yaml precision.name="$policy" trainer.device="$DEVICE" \
    trainer.epochs=1 trainer.max_steps_per_epoch="$STEPS" trainer.log_every=50 output="$OUT/runs" "${DATA[@]}" \
    > "$OUT/fashion_mnist_$policy.log" 2>&1
  ended "fashion_mnist $policy" $?; grep -E "^done:|^test accuracy" "$OUT/fashion_mnist_$policy.log"
done

part "ResNet-50, batch $BATCH, channels_last, synthetic: mixt vs PyTorch eager"
MIXT=bin/mixt timeout -k 10 "$(within $((CPU ? 240 : 300)))" bash bench/resnet50_compare.sh --device "$DEVICE" --batch "$BATCH" \
  --steps "$BENCH_STEPS" --warmup "$BENCH_WARMUP" --precision "$RESNET_POLICIES" \
  --out "$OUT/resnet50" > "$OUT/resnet50.md" 2>&1
ended resnet50 $?; cat "$OUT/resnet50.md"

part "ResNet-50 peak memory per policy, master weights included (mixt bench, batch $BATCH)"
timeout -k 10 "$(within $((CPU ? 120 : 150)))" bin/mixt bench recipes/resnet50/synthetic.yaml --precision "$MEMORY_POLICIES" \
  --steps $((CPU ? 1 : 3)) --warmup $((CPU ? 0 : 2)) --batch "$BATCH" trainer.device="$DEVICE" "${RESNET_SMALL[@]}" \
  optimizer.lr="$(python3 -c "print(0.256 * $BATCH / 256)")" scheduler=null output="$OUT/memory" > "$OUT/memory.md" 2>&1
ended memory $?; grep -E "^\| |peak memory" "$OUT/memory.md"

part "ResNet-50 activation checkpointing, none vs all (mixt bench, batch $BATCH)"
timeout -k 10 "$(within $((CPU ? 120 : 150)))" bin/mixt bench recipes/resnet50/synthetic.yaml --precision "$CHECKPOINTING_POLICIES" \
  --activation-checkpointing none,all --steps $((CPU ? 1 : 3)) --warmup $((CPU ? 0 : 2)) --batch "$BATCH" \
  trainer.device="$DEVICE" "${RESNET_SMALL[@]}" optimizer.lr="$(python3 -c "print(0.256 * $BATCH / 256)")" scheduler=null \
  output="$OUT/checkpointing" > "$OUT/checkpointing.md" 2>&1
ended checkpointing $?; grep -E "^\| |peak memory" "$OUT/checkpointing.md"

part "float8 on $DEVICE: Fashion-MNIST under fp8_tensorwise, fp8_delayed, fp8_rowwise; ViT-B/16 amp_bf16 vs bf16_master vs fp8"
# fp8_rowwise's CUDA path (rowwise _scaled_mm) against its CPU emulation, which equals torchao's bitwise.
timeout -k 10 "$(within 60)" bin/test_float8 --gtest_filter='Float8Rowwise.CudaScaledMmAgreesWithTheCpuEmulation' \
  > "$OUT/float8_rowwise_cuda.log" 2>&1
ended float8_rowwise_cuda $?; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|relative" "$OUT/float8_rowwise_cuda.log"
for policy in fp8_tensorwise fp8_delayed fp8_rowwise; do
  timeout -k 10 "$(within 90)" bin/mixt run recipes/fashion_mnist_fp8.yaml precision.name="$policy" trainer.device="$DEVICE" \
    trainer.epochs=1 trainer.max_steps_per_epoch="$STEPS" trainer.log_every=50 output="$OUT/runs" "${DATA[@]}" \
    > "$OUT/fashion_mnist_$policy.log" 2>&1
  ended "fashion_mnist $policy" $?; grep -E "^done:|^test accuracy|float8" "$OUT/fashion_mnist_$policy.log"
done
if ((!CPU)); then
  # 197 tokens x 256 images: rows a multiple of 16, as _scaled_mm's weight-gradient matmul needs on CUDA.
  timeout -k 10 "$(within 180)" bin/mixt bench recipes/resnet50/synthetic.yaml model.name=vit_b_16 \
    --precision amp_bf16,bf16_master,fp8_tensorwise,fp8_rowwise --steps 20 --warmup 5 --batch 256 trainer.device="$DEVICE" \
    optimizer.lr=0.001 scheduler=null output="$OUT/float8" > "$OUT/float8.md" 2>&1
  ended float8_vit $?; grep -E "^\| |peak memory" "$OUT/float8.md"
fi

part "$BACKEND at world size 1 under torchrun"
timeout -k 10 "$(within 90)" torchrun --no-python --nproc-per-node=1 bin/mixt run recipes/fashion_mnist.yaml trainer.device="$DEVICE" \
  trainer.distributed.backend="$BACKEND" trainer.epochs=1 trainer.max_steps_per_epoch=$((STEPS < 100 ? STEPS : 100)) \
  output="$OUT/runs" "${DATA[@]}" > "$OUT/torchrun.log" 2>&1
ended torchrun $?; grep -E "^done:|^test accuracy|data parallel" "$OUT/torchrun.log"

part "callbacks on $DEVICE: the ema average kept on the CPU, TensorBoard's event file (with the allocator peak on CUDA)"
timeout -k 10 "$(within 60)" bin/mixt run recipes/fashion_mnist.yaml trainer.device="$DEVICE" trainer.epochs=1 \
  trainer.max_steps_per_epoch="$STEPS" output="$OUT/runs_callbacks" "${DATA[@]}" \
  'callbacks=[{name: ema, decay: 0.99, device: cpu}]' > "$OUT/callbacks.log" 2>&1
ended callbacks $?; grep -E "ema val loss|^test accuracy" "$OUT/callbacks.log"
ls "$OUT"/runs_callbacks/*/*/events.out.tfevents.* 2>/dev/null | head -1

part "the loader's path on $DEVICE (4 worker threads, pinned host memory on CUDA): a generated CIFAR-10 tree"
CIFAR=$(mktemp -d)
timeout -k 10 "$(within 60)" python3 tests/fixtures/data/make_cifar10.py "$CIFAR" --records 512 &&
  timeout -k 10 "$(within 90)" bin/mixt run recipes/fashion_mnist.yaml trainer.device="$DEVICE" trainer.epochs=1 \
    "data={train: {name: cifar10, root: $CIFAR, batch_size: 64, workers: 4}, val: {name: cifar10, root: $CIFAR, split: test, batch_size: 256, workers: 4}}" \
    "model={name: simple_cnn, channels: [16, 32], hidden: 64}" output="$OUT/runs" > "$OUT/loader.log" 2>&1
ended loader $?; grep -E "^done:|^test accuracy" "$OUT/loader.log"

part "sharded data parallel on $DEVICE: GPT-2 under bf16_master, 2 $BACKEND ranks, each trainer.distributed.sharding"
if ((SHARDED_RANKS < 2)); then
  echo "sharding: not run: this machine has $SHARDED_RANKS GPU, and $BACKEND needs one a rank" | tee -a "$OUT/parts.log"
else
  TOKENS=$(mktemp -d)
  python3 -c "import array, random; r = random.Random(0)
for name, n in (('train', 400_000), ('val', 40_000)): array.array('H', (r.randrange(50257) for _ in range(n))).tofile(open('$TOKENS/' + name + '.bin', 'wb'))"
  for mode in "${SHARDED_MODES[@]}"; do
    timeout -k 10 "$(within 60)" torchrun --standalone --nproc-per-node=2 --no-python bin/mixt run \
      recipes/gpt2/gpt2_124m.yaml precision.name=bf16_master trainer.device="$DEVICE" \
      trainer.distributed.backend="$BACKEND" trainer.distributed.sharding="$mode" trainer.accumulate=1 trainer.epochs=1 \
      trainer.max_steps_per_epoch="$SHARDED_STEPS" trainer.log_every=5 data.train.files="$TOKENS/train.bin" \
      data.val.files="$TOKENS/val.bin" data.train.workers=0 data.val.workers=0 'callbacks=[]' "${SHARDED[@]}" \
      output="$OUT/runs_sharded_$mode" > "$OUT/sharding_$mode.log" 2>&1
    ended "sharding $mode" $?; grep -E "^done:|^validation|data parallel|whole at once" "$OUT/sharding_$mode.log"
  done
fi

if [ "${GPT2:-1}" != 0 ]; then
  if (($(left) < 120)); then
    echo "gpt2: not run: $(left) s of the run's ${BUDGET} s were left; run it alone with GPT2=only" | tee -a "$OUT/parts.log"
  else
    gpt2_part
  fi
fi
part "done"
