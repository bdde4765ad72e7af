#!/usr/bin/env python3
"""QLoRA references from torchao's NF4 (torchao 0.18, to_nf4 and linear_nf4) and PEFT over
transformers' LlamaForCausalLM (no downloads).

  make_qlora_golden.py golden OUT_DIR
      OUT_DIR/nf4.safetensors  torchao's to_nf4(w, block_size=64, scaler_block_size=256) of
                               seeded weights, float32 and bfloat16 ("f32_*", "bf16_*"): the
                               weight, quantized_data (codes), quantized_scalers, quantization_factor,
                               scaler_mean and get_original_weight() (the `.to(dtype)` dequantisation);
                               "short_*": a weight of 64 blocks (torchao takes only multiples
                               of 256 blocks), with mixt's extension: torchao's formulas over
                               one short group of scales, written out below; "smol_*": bfloat16
                               [192, 576] (SmolLM2-135M's k_proj), 6 groups and one of 192
      OUT_DIR/linear.safetensors  linear_nf4's output and input gradient for a seeded input and
                               output gradient: float32, bfloat16, and float32 under
                               torch.autocast("cpu", bfloat16) (amp_bf16)
      OUT_DIR/base/            a seeded LlamaForCausalLM (grouped-query attention, tied head)
                               whose every linear layer torchao takes (numel a multiple of
                               64 * 256): mixt's `model.from`
      OUT_DIR/tokens.bin       make_lora_golden.py's token chain
      OUT_DIR/init_adapter/    PEFT's LoraConfig(r=4, lora_alpha=8, on q_proj, v_proj and
                               mlp.down_proj), lora_B set to small random values: `adapter.from`
      OUT_DIR/training.json    the loss and gradient norm of each of make_lora_golden.py's 20
                               AdamW steps with every linear layer of the decoder (not the tied
                               lm_head) held as torchao's NF4Tensor under PEFT's LoRA layers
                               (torchtune's FrozenNF4Linear: the weight an NF4Tensor parameter,
                               F.linear dispatched to linear_nf4), and mixt's recipe sections
      OUT_DIR/final_adapter/   the trained adapter, PEFT's save_pretrained
      training.json's amp_*    the same 20 steps from init_adapter with the forward and the loss
                               under torch.autocast("cpu", bfloat16) (mixt's amp_bf16)

float32, one thread (the sums of the CPU matmuls as mixt's test computes them).
Generated at test time into the build directory, once per generator and
torch/transformers/peft/torchao version (OUT_DIR/stamp).
"""
import json
import sys
from pathlib import Path

import peft
import torch
import torch.nn.functional as F
import torchao
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import save_file
# torchao 0.18 moved torchao.dtypes.nf4tensor here
from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import NF4Tensor, linear_nf4, to_nf4
from transformers import LlamaConfig, LlamaForCausalLM

import make_lora_golden as lora  # tests/golden/make_lora_golden.py: the token chain and the loop
from golden_stamp import Stamp  # tests/golden/golden_stamp.py

VOCAB = lora.VOCAB
# Every decoder projection a whole number of torchao's groups (64 * 256 weights): q and o
# 256 x 256, k and v 128 x 256, the MLP 512 x 256.
MODEL = {"num_layers": 2, "num_heads": 4, "num_kv_heads": 2, "hidden_dim": 256, "mlp_dim": 512,
         "rope_theta": 10000.0}


def nf4_parts(prefix, nf4):
    return {f"{prefix}_codes": nf4.quantized_data.contiguous(), f"{prefix}_scalers": nf4.quantized_scalers.contiguous(),
            f"{prefix}_factors": nf4.quantization_factor.contiguous(), f"{prefix}_mean": nf4.scaler_mean.reshape(1),
            f"{prefix}_dequantized": nf4.get_original_weight().contiguous()}


def short_group(weight, prefix="short"):
    """mixt's extension for a number of blocks that is not a multiple of 256: torchao's
    double_quantize_scalers and dequantize_scalers with the last group of scales shorter
    (here the only one), every operation as torchao writes it; the codes are torchao's own
    convert_to_norm_float_weight, which does not depend on the groups."""
    flat = weight.flatten()
    absmax = flat.view(-1, 64).abs().max(dim=1).values
    mean = absmax.mean()
    centred = absmax - mean
    groups = [centred[i:i + 256] for i in range(0, centred.numel(), 256)]
    factors = torch.stack([256 / (2 * g.abs().max()) for g in groups])
    scalers = torch.cat([(g * f).round().clamp(-128, 127) for g, f in zip(groups, factors)]).to(torch.int8)
    lut = torch.tensor([-1.0000, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0000, 0.0796, 0.1609, 0.2461,
                        0.3379, 0.4407, 0.5626, 0.7230, 1.0000], dtype=weight.dtype)
    codes = NF4Tensor.convert_to_norm_float_weight(weight, absmax.numel(), 64, lut)
    per_block = torch.cat([f.expand(g.numel()) for g, f in zip(groups, factors)])
    dequantized_scalers = (scalers / per_block).to(weight.dtype) + mean
    repeated = dequantized_scalers.unsqueeze(-1).expand(-1, 32).flatten()
    first = lut[(codes >> 4).long()] * repeated
    second = lut[(codes & 0b1111).long()] * repeated
    return {f"{prefix}_codes": codes, f"{prefix}_scalers": scalers, f"{prefix}_factors": factors,
            f"{prefix}_mean": mean.reshape(1),
            f"{prefix}_dequantized": torch.stack([first, second], dim=-1).reshape(weight.shape)}


def nf4_references(out_dir):
    torch.manual_seed(0)
    tensors = {}
    f32 = torch.randn(256, 128) * 0.05  # 512 blocks, 2 groups
    f32[7, 3] = 0.9  # an outlier: its block's codes and its group's scales
    tensors["f32_weight"] = f32
    tensors.update(nf4_parts("f32", to_nf4(f32, block_size=64, scaler_block_size=256)))
    bf16 = (torch.randn(128, 256) * 0.02).to(torch.bfloat16)
    tensors["bf16_weight"] = bf16
    tensors.update(nf4_parts("bf16", to_nf4(bf16, block_size=64, scaler_block_size=256)))
    short = torch.randn(64, 64) * 0.05  # 64 blocks: one group of 64 scales
    tensors["short_weight"] = short
    tensors.update(short_group(short))
    smol = (torch.randn(192, 576) * 0.05).to(torch.bfloat16)  # SmolLM2-135M's k_proj: 1,728 blocks, 6 groups and 192
    tensors["smol_weight"] = smol
    tensors.update(short_group(smol, "smol"))
    save_file(tensors, out_dir / "nf4.safetensors")

    out = {}
    for name, dtype, autocast in [("f32", torch.float32, False), ("bf16", torch.bfloat16, False),
                                  ("amp", torch.float32, True)]:
        weight = (torch.randn(256, 128) * 0.05).to(dtype)
        x = torch.randn(3, 5, 128).to(dtype).requires_grad_(True)
        nf4 = to_nf4(weight)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = linear_nf4(x, nf4)
        grad = torch.randn(y.shape).to(y.dtype)
        y.backward(grad)
        out.update({f"{name}_weight": weight, f"{name}_input": x.detach(), f"{name}_output": y.detach(),
                    f"{name}_grad_output": grad, f"{name}_grad_input": x.grad})
    save_file(out, out_dir / "linear.safetensors")


def base_model():
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, max_position_embeddings=lora.CONTEXT, hidden_size=MODEL["hidden_dim"],
        intermediate_size=MODEL["mlp_dim"], num_hidden_layers=MODEL["num_layers"],
        num_attention_heads=MODEL["num_heads"], num_key_value_heads=MODEL["num_kv_heads"],
        rope_theta=MODEL["rope_theta"], rms_norm_eps=1e-5, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation="sdpa"))


def quantize_decoder(model):
    """torchtune's FrozenNF4Linear on every nn.Linear of the decoder (PEFT's base_layer for
    the adapted ones): the weight becomes an NF4Tensor parameter, which F.linear sends to
    linear_nf4. The tied lm_head stays (it is the embedding)."""
    count = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and ".layers." in name and ".lora_" not in name:
            module.weight = torch.nn.Parameter(to_nf4(module.weight.detach()), requires_grad=False)
            count += 1
    assert count == 7 * MODEL["num_layers"], count


def train_amp(model, ids):
    """make_lora_golden.py's loop with the forward and the loss under torch.autocast("cpu",
    bfloat16), the backward and the step outside it (mixt's amp_bf16)."""
    params = [p for p in model.parameters() if p.requires_grad]
    o = lora.OPTIMIZER
    optimizer = torch.optim.AdamW(params, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
                                  weight_decay=o["weight_decay"], foreach=False)
    model.train()
    losses, grad_norms = [], []
    for step in range(lora.STEPS):
        windows = torch.stack([ids[w * lora.CONTEXT:w * lora.CONTEXT + lora.CONTEXT + 1]
                               for w in range(step * lora.BATCH, step * lora.BATCH + lora.BATCH)])
        x, y = windows[:, :-1].contiguous(), windows[:, 1:].contiguous()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, lora.CLIP_GRAD_NORM)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
    return losses, grad_norms


def golden(out_dir):
    stamp = Stamp(out_dir, __file__)
    stamp.text = stamp.text.rstrip("\n") + f" peft {peft.__version__} torchao {torchao.__version__}\n"
    if stamp.current():
        return
    nf4_references(out_dir)
    ids = lora.token_file(out_dir / "tokens.bin")
    torch.manual_seed(0)
    base_model().save_pretrained(out_dir / "base", safe_serialization=True)
    torch.manual_seed(1)
    config = LoraConfig(r=lora.ADAPTER["rank"], lora_alpha=lora.ADAPTER["alpha"], lora_dropout=0.0,
                        target_modules=lora.ADAPTER["targets"], task_type="CAUSAL_LM")
    model = get_peft_model(LlamaForCausalLM.from_pretrained(out_dir / "base", attn_implementation="sdpa").eval(),
                           config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.02)
    model.save_pretrained(out_dir / "init_adapter")
    quantize_decoder(model)
    losses, grad_norms = lora.train(model, ids)
    assert sum(losses[-5:]) < sum(losses[:5]) - 0.2, losses  # it learns a little (a random base, 4 bits)
    model.save_pretrained(out_dir / "final_adapter")
    model = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(out_dir / "base", attn_implementation="sdpa"),
                                      out_dir / "init_adapter", is_trainable=True)
    quantize_decoder(model)
    amp_losses, amp_grad_norms = train_amp(model, ids)
    golden = {"steps": lora.STEPS, "amp_losses": amp_losses, "amp_grad_norms": amp_grad_norms, "batch_size": lora.BATCH, "context": lora.CONTEXT, "vocab": VOCAB,
              "adapter": lora.ADAPTER, "optimizer": lora.OPTIMIZER, "clip_grad_norm": lora.CLIP_GRAD_NORM,
              "losses": losses, "grad_norms": grad_norms}
    (out_dir / "training.json").write_text(json.dumps(golden, indent=1) + "\n")
    stamp.write()
    print(f"{out_dir}: {lora.STEPS} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}")


def main():
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    if len(sys.argv) == 3 and sys.argv[1] == "golden":
        golden(Path(sys.argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
