#!/usr/bin/env python3
"""The losses of 20 AdamW steps of a small GPT-2 or Llama, trained by a nanoGPT-style PyTorch loop.

  make_lm_training_golden.py {gpt2|llama} OUT_DIR

Writes, for tests/cli/lm_training_parity_test.cpp (no downloads):
  OUT_DIR/tokens.bin         nanoGPT's format (bare uint16 ids): STEPS * BATCH * CONTEXT + 1
                             tokens of a seeded Markov chain over VOCAB ids (learnable, so the
                             losses move)
  OUT_DIR/init/model.safetensors (and config.json)
                             a seeded GPT2LMHeadModel, or LlamaForCausalLM (grouped-query
                             attention, tied head), written by save_pretrained: the shared
                             starting point (lm_head.weight tied, left out)
  OUT_DIR/training.json      the hyper-parameters (mixt's sections, which the test puts in its
                             recipe), and the loss and gradient norm (before clipping) of each
                             of the STEPS steps
  OUT_DIR/final.safetensors  the trained weights (transformers' names, lm_head.weight left out:
                             what `mixt export` writes)

The loop is nanoGPT's train.py with its batches in mixt's order for `shuffle: false`: window
w is tokens[w*T : w*T + T + 1] (consecutive windows share one token), batch b holds windows
b*B .. b*B + B - 1, x = window[:-1], y = window[1:]. The loss is
F.cross_entropy(logits.view(-1, V), y.view(-1)) on the model's logits (not transformers' own
loss, which shifts the labels itself); torch.optim.AdamW(foreach=False), weight decay on the
2-D parameters only (nanoGPT's configure_optimizers; mixt's weight_decay_1d: false),
clip_grad_norm_ as nanoGPT's grad_clip; dropout off; one thread.

Three choices make the reference mixt's arithmetic to the bit; each other way measured gave
losses up to 1.3e-7 relative apart over the 20 steps (a float32 ulp on some steps):
  - the gradient norm is taken over the parameters in the optimizer's order (the decayed
    group, then the others), as mixt's trainer.clip_grad_norm takes them: the norm of the
    per-tensor norms sums them in that order, and model.parameters()'s order gives a norm one
    ulp off on some steps, hence a clip factor one ulp off;
  - attn_implementation="sdpa": transformers calls scaled_dot_product_attention, as mixt
    does ("eager" writes softmax(q k^T / sqrt(d)) v out);
  - activation_function="gelu_pytorch_tanh" (GPT-2): nanoGPT's (and mixt's)
    nn.GELU(approximate="tanh"), a fused kernel. transformers' GPT-2 default, "gelu_new",
    writes the same formula out in Python and rounds differently.
Llama needs nothing of the kind: transformers' sdpa path is what mixt's llama computes.

Generated at test time into the build directory, once per generator and torch/transformers
version (OUT_DIR/stamp).
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from golden_stamp import Stamp  # tests/golden/golden_stamp.py

STEPS = 20
BATCH = 4
CONTEXT = 32
VOCAB = 96

# mixt's recipe sections; the loop below reads its hyper-parameters from them.
MODELS = {
    "gpt2": {"name": "gpt2", "vocab_size": VOCAB, "context_length": CONTEXT, "num_layers": 2, "num_heads": 2,
             "hidden_dim": 64, "dropout": 0, "attention_dropout": 0},
    "llama": {"name": "llama", "vocab_size": VOCAB, "context_length": CONTEXT, "num_layers": 2, "num_heads": 4,
              "num_kv_heads": 2, "hidden_dim": 64, "mlp_dim": 112, "rope_theta": 10000.0, "tie_embeddings": True},
}
OPTIMIZER = {"name": "adamw", "lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1,
             "weight_decay_1d": False, "foreach": "false"}
CLIP_GRAD_NORM = 1.0


def token_file(path):
    """A Markov chain over VOCAB ids: the next id is a fixed function of the last one most of the time."""
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


def llama_model(section):
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB,
        max_position_embeddings=CONTEXT,
        hidden_size=section["hidden_dim"],
        intermediate_size=section["mlp_dim"],
        num_hidden_layers=section["num_layers"],
        num_attention_heads=section["num_heads"],
        num_key_value_heads=section["num_kv_heads"],
        rope_theta=section["rope_theta"],
        rms_norm_eps=1e-5,
        tie_word_embeddings=section["tie_embeddings"],
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation="sdpa",
    ))


def gpt2_model(section):
    return GPT2LMHeadModel(GPT2Config(
        vocab_size=VOCAB,
        n_positions=CONTEXT,
        n_embd=section["hidden_dim"],
        n_layer=section["num_layers"],
        n_head=section["num_heads"],
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=1e-5,
        activation_function="gelu_pytorch_tanh",  # nanoGPT's nn.GELU(approximate="tanh"), as mixt
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation="sdpa",
    ))


def train(model, ids):
    """nanoGPT's loop: forward, cross-entropy, backward, clip, AdamW step; the loss of each step."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": OPTIMIZER["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=OPTIMIZER["lr"], betas=tuple(OPTIMIZER["betas"]), eps=OPTIMIZER["eps"], foreach=False)
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
        norm = torch.nn.utils.clip_grad_norm_(decay + no_decay, CLIP_GRAD_NORM)  # the optimizer's order
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
    return losses, grad_norms


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in MODELS:
        sys.exit(__doc__)
    kind, out_dir = sys.argv[1], Path(sys.argv[2])
    section = MODELS[kind]
    stamp = Stamp(out_dir, __file__)
    if stamp.current():
        return
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    ids = token_file(out_dir / "tokens.bin")
    torch.manual_seed(0)
    model = gpt2_model(section) if kind == "gpt2" else llama_model(section)
    assert model.lm_head.weight is model.get_input_embeddings().weight
    model.save_pretrained(out_dir / "init", safe_serialization=True)
    losses, grad_norms = train(model, ids)
    assert losses[-1] < losses[0] - 0.5, losses  # it learns the chain
    save_file({k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"},
              out_dir / "final.safetensors")
    golden = {"steps": STEPS, "batch_size": BATCH, "context": CONTEXT, "vocab": VOCAB, "model": section,
              "optimizer": OPTIMIZER, "clip_grad_norm": CLIP_GRAD_NORM, "losses": losses,
              "grad_norms": grad_norms}
    (out_dir / "training.json").write_text(json.dumps(golden, indent=1) + "\n")
    stamp.write()
    print(f"{out_dir}: {STEPS} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
