#!/usr/bin/env python3
"""LoRA references from PEFT over transformers' LlamaForCausalLM (no downloads).

  make_lora_golden.py golden OUT_DIR
      OUT_DIR/base/            a seeded LlamaForCausalLM (grouped-query attention, tied head),
                               save_pretrained's config.json and model.safetensors: mixt's
                               `model.from`
      OUT_DIR/tokens.bin       nanoGPT's format (bare uint16 ids), a seeded Markov chain (as
                               make_lm_training_golden.py writes it)
      OUT_DIR/init_adapter/    peft.get_peft_model(base, LoraConfig(r=4, lora_alpha=8, on q_proj,
                               v_proj and mlp.down_proj)) with PEFT's initialisation, lora_B then set to small
                               random values (PEFT's zeros would make the first step's lora_A
                               gradients zero and hide a wrong product), written by PEFT's
                               save_pretrained: mixt's `adapter.from`
      OUT_DIR/training.json    mixt's recipe sections, and the loss and gradient norm (before
                               clipping) of each of the STEPS steps of the loop below
      OUT_DIR/final_adapter/   the trained adapter, PEFT's save_pretrained
      OUT_DIR/io.safetensors   ids and the logits of the base with final_adapter (PeftModel,
                               eval mode), and of the base with init_adapter, and merged_logits:
                               transformers' logits of merged/
      OUT_DIR/merged/          final_adapter merged into the base by PEFT's merge_and_unload()
                               (float32, on the CPU), save_pretrained's model.safetensors and
                               config.json: what `mixt export RUN --format transformers` writes
      OUT_DIR/dora/            the same files for DoRA (LoraConfig(use_dora=True), the same
                               options): init_adapter/ (its lora_magnitude_vector PEFT's
                               initialisation, the base's row norms), training.json,
                               final_adapter/, io.safetensors, merged/; over the same base/ and
                               tokens.bin
  make_lora_golden.py check OUT_DIR ADAPTER_DIR [dora]
      PEFT reads an adapter folder mixt wrote: PeftModel.from_pretrained(base, ADAPTER_DIR) must
      take every tensor of it (the state dict's lora tensors equal the file's, none missing,
      none left over) and give final_adapter's logits; prints "agree" and the largest
      difference, exit status 1 otherwise. `dora`: against OUT_DIR/dora's references.
  make_lora_golden.py check-merged OUT_DIR MODEL_DIR [dora]
      transformers reads a merged export mixt wrote: LlamaForCausalLM.from_pretrained(MODEL_DIR)
      gives the logits of PEFT's merged model; prints "agree" and the largest difference.

The loop: PeftModel's trainable parameters (named_parameters order: layer by layer, q_proj's
lora_A, lora_B, then v_proj's, then down_proj's: mixt's order too),
torch.optim.AdamW(foreach=False) with weight decay on the 2-D ones (lora_A and lora_B) and none on
DoRA's 1-D magnitudes, as mixt's adamw with weight_decay_1d false groups them, the gradient norm
clipped group by group as mixt's trainer.clip_grad_norm does (the 2-D ones, then the
magnitudes: the order of the norm's sum); x and y as make_lm_training_golden.py forms them (mixt's
order for `shuffle: false`), F.cross_entropy on the logits; float32, one thread, sdpa
attention.

Generated at test time into the build directory, once per generator and
torch/transformers/peft version (OUT_DIR/stamp).
"""
import json
import sys
from pathlib import Path

import numpy as np
import peft
import torch
import torch.nn.functional as F
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

from golden_stamp import Stamp  # tests/golden/golden_stamp.py

STEPS = 20
BATCH = 4
CONTEXT = 32
VOCAB = 96
MODEL = {"num_layers": 2, "num_heads": 4, "num_kv_heads": 2, "hidden_dim": 64, "mlp_dim": 112,
         "rope_theta": 10000.0}
ADAPTER = {"name": "lora", "rank": 4, "alpha": 8, "dropout": 0.0, "targets": ["q_proj", "v_proj", "mlp.down_proj"]}
VARIANTS = [("", False), ("dora", True)]  # OUT_DIR's sub-folder, use_dora
OPTIMIZER = {"name": "adamw", "lr": 3e-2, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1,
             "weight_decay_1d": False, "foreach": "false"}
CLIP_GRAD_NORM = 1.0


def token_file(path):
    """make_lm_training_golden.py's chain: the next id is a fixed function of the last one most of the time."""
    rng = np.random.default_rng(0)
    count = STEPS * BATCH * CONTEXT + 1
    successor = rng.permutation(VOCAB)
    ids = np.empty(count, dtype=np.int64)
    ids[0] = 0
    noise = rng.random(count)
    random_ids = rng.integers(0, VOCAB, count)
    for i in range(1, count):
        ids[i] = successor[ids[i - 1]] if noise[i] < 0.7 else random_ids[i]
    ids.astype(np.uint16).tofile(path)
    return torch.from_numpy(ids)


def base_model():
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, max_position_embeddings=CONTEXT, hidden_size=MODEL["hidden_dim"],
        intermediate_size=MODEL["mlp_dim"], num_hidden_layers=MODEL["num_layers"],
        num_attention_heads=MODEL["num_heads"], num_key_value_heads=MODEL["num_kv_heads"],
        rope_theta=MODEL["rope_theta"], rms_norm_eps=1e-5, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation="sdpa"))


def load_base(out_dir):
    return LlamaForCausalLM.from_pretrained(out_dir / "base", attn_implementation="sdpa").eval()


def logits_of(model, ids):
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits.contiguous()


def train(model, ids):
    params = [p for p in model.parameters() if p.requires_grad]
    # mixt's adamw with weight_decay_1d false: DoRA's magnitudes (1-D) without weight decay.
    groups = [{"params": [p for p in params if p.dim() > 1]},
              {"params": [p for p in params if p.dim() <= 1], "weight_decay": 0.0}]
    clipped = groups[0]["params"] + groups[1]["params"]  # mixt clips the optimizer's parameters, group by group
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=OPTIMIZER["lr"],
                                  betas=tuple(OPTIMIZER["betas"]), eps=OPTIMIZER["eps"],
                                  weight_decay=OPTIMIZER["weight_decay"], foreach=False)
    model.train()
    losses, grad_norms = [], []
    for step in range(STEPS):
        windows = torch.stack([ids[w * CONTEXT:w * CONTEXT + CONTEXT + 1]
                               for w in range(step * BATCH, step * BATCH + BATCH)])
        x, y = windows[:, :-1].contiguous(), windows[:, 1:].contiguous()
        logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(clipped, CLIP_GRAD_NORM)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
    return losses, grad_norms


def adapter_golden(out_dir, variant_dir, use_dora, ids):
    """One variant's references in variant_dir, over out_dir's base."""
    variant_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(1)
    config = LoraConfig(r=ADAPTER["rank"], lora_alpha=ADAPTER["alpha"], lora_dropout=ADAPTER["dropout"],
                        target_modules=ADAPTER["targets"], task_type="CAUSAL_LM", use_dora=use_dora)
    model = get_peft_model(load_base(out_dir), config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.02)
    model.save_pretrained(variant_dir / "init_adapter")
    probe = torch.randint(0, VOCAB, [2, 13], dtype=torch.int64)
    io = {"ids": probe, "init_logits": logits_of(model, probe)}
    losses, grad_norms = train(model, ids)
    assert sum(losses[-5:]) < sum(losses[:5]) - 0.5, losses  # it learns the chain a little (the base is random)
    model.save_pretrained(variant_dir / "final_adapter")
    io["final_logits"] = logits_of(model, probe)
    merged = model.merge_and_unload()  # float32, on the CPU
    merged.save_pretrained(variant_dir / "merged", safe_serialization=True)
    io["merged_logits"] = logits_of(LlamaForCausalLM.from_pretrained(variant_dir / "merged"), probe)
    save_file(io, variant_dir / "io.safetensors")
    adapter = dict(ADAPTER, name="dora" if use_dora else "lora")
    golden = {"steps": STEPS, "batch_size": BATCH, "context": CONTEXT, "vocab": VOCAB, "adapter": adapter,
              "optimizer": OPTIMIZER, "clip_grad_norm": CLIP_GRAD_NORM, "losses": losses, "grad_norms": grad_norms}
    (variant_dir / "training.json").write_text(json.dumps(golden, indent=1) + "\n")
    print(f"{variant_dir}: {adapter['name']}, {STEPS} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}")


def golden(out_dir):
    stamp = Stamp(out_dir, __file__)
    stamp.text = stamp.text.rstrip("\n") + f" peft {peft.__version__}\n"
    if stamp.current():
        return
    ids = token_file(out_dir / "tokens.bin")
    torch.manual_seed(0)
    model = base_model()
    model.save_pretrained(out_dir / "base", safe_serialization=True)
    for sub, use_dora in VARIANTS:
        adapter_golden(out_dir, out_dir / sub, use_dora, ids)
    stamp.write()


def check(out_dir, adapter_dir, variant):
    references = out_dir / variant
    written = load_file(adapter_dir / "adapter_model.safetensors")
    reference = load_file(references / "final_adapter" / "adapter_model.safetensors")
    if sorted(written) != sorted(reference):
        print(f"mixt wrote {sorted(written)}, PEFT writes {sorted(reference)}")
        return 1
    model = PeftModel.from_pretrained(load_base(out_dir), adapter_dir)
    loaded = peft.get_peft_model_state_dict(model)
    for name, tensor in written.items():
        if name not in loaded or not torch.equal(loaded[name], tensor):
            print(f"PEFT did not load {name} as written")
            return 1
    return compare(logits_of(model, load_file(references / "io.safetensors")["ids"]), references, "final_logits")


def check_merged(out_dir, model_dir, variant):
    references = out_dir / variant
    model = LlamaForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa")
    return compare(logits_of(model, load_file(references / "io.safetensors")["ids"]), references, "merged_logits")


def compare(got, references, which):
    expected = load_file(references / "io.safetensors")[which]
    diff = (got - expected).abs().max().item()
    scale = expected.abs().max().item()
    print(f"{'agree' if diff <= 1e-5 * scale else 'differ'}: max |logits - PEFT's| = {diff:.3g} (max |logit| {scale:.3g})")
    return 0 if diff <= 1e-5 * scale else 1


def main():
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    if len(sys.argv) == 3 and sys.argv[1] == "golden":
        golden(Path(sys.argv[2]))
    elif len(sys.argv) in (4, 5) and sys.argv[1] in ("check", "check-merged") and sys.argv[4:] in ([], ["dora"]):
        command = check if sys.argv[1] == "check" else check_merged
        sys.exit(command(Path(sys.argv[2]), Path(sys.argv[3]), "".join(sys.argv[4:])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
