#!/usr/bin/env python3
"""Golden values for tests/unit/float8_test.cpp, from torchao's float8 training itself.

torchao 0.18 (`convert_to_float8_training`, recipe "tensorwise": dynamic per-tensor
scales, e4m3 input and weight, e5m2 output gradient, torch._scaled_mm) runs on the CPU with
torch 2.11; mixt's float8 linear layers (mixt/helpers/float8.h) and the fp8_tensorwise
policy must match it bit for bit:

- "layers": a small MLP whose three linear layers are all Float8Linear, with fixed
  weights, input and output gradient, in bfloat16 (as fp8_tensorwise's bfloat16 model
  computes) and in float32: forward output, input gradient, weight and bias gradients.
- "vit": a ViT with one encoder block (torchvision's VisionTransformer, its attention
  computed as mixt's is, with the stacked q/k/v projection an nn.Linear) in bfloat16, every
  linear layer Float8Linear: output, input gradient and every parameter's gradient.
- "training": 20 AdamW steps of a 4-layer MLP trained as fp8_tensorwise trains it: a
  bfloat16 model under autocast(bfloat16) whose middle two linear layers are Float8Linear
  (the policy's default keeps the first and the last in bfloat16), float32 master weights
  updated by torch.optim.AdamW and rounded into the model after each step; the loss of
  every step and the final masters.

One thread, as the C++ test runs (the CPU matmuls' sums could otherwise be split
differently). Regenerate with
    python3 tests/golden/make_float8_golden.py > tests/golden/float8_tensorwise.json
"""
import json

import numpy  # noqa: F401  (values() prints through numpy's float32 repr)
import torch
import torch.nn.functional as F
import torchao
from torchao.float8 import Float8LinearConfig, convert_to_float8_training


def values(t):
    # The shortest decimal that reads back as the same float32 (numpy's repr): a third of
    # the file that Python's float repr of the widened value would write.
    return [float(str(v)) for v in t.detach().float().flatten().numpy()]


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def linears(model):
    return [m for m in model if isinstance(m, torch.nn.Linear)]


def layers_case(dtype):
    torch.manual_seed(0)
    sizes = [32, 64, 48, 16]
    model = mlp(sizes).to(dtype)
    initial = [{"weight": values(m.weight), "bias": values(m.bias)} for m in linears(model)]
    convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name("tensorwise"))
    x = (torch.randn(4, 8, sizes[0]) * 3).to(dtype).requires_grad_()
    y = model(x)
    grad_output = (torch.randn(y.shape) * 0.01).to(dtype)
    y.backward(grad_output)
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "sizes": sizes,
        "input_shape": list(x.shape),
        "layers": initial,
        "input": values(x),
        "grad_output": values(grad_output),
        "output": values(y),
        "grad_input": values(x.grad),
        "grads": [{"weight": values(m.weight.grad), "bias": values(m.bias.grad)} for m in linears(model)],
    }


class Attention(torch.nn.Module):
    """torchvision's nn.MultiheadAttention as mixt's ViT computes it (at::linear on the
    stacked in_proj, scaled_dot_product_attention, out_proj) with the stacked projection an
    nn.Linear, so that convert_to_float8_training makes it a Float8Linear too (it swaps
    only nn.Linear modules; MultiheadAttention uses in_proj_weight functionally)."""

    def __init__(self, mha):
        super().__init__()
        self.heads = mha.num_heads
        self.in_proj = torch.nn.Linear(mha.embed_dim, 3 * mha.embed_dim)
        self.in_proj.weight, self.in_proj.bias = mha.in_proj_weight, mha.in_proj_bias
        self.out_proj = mha.out_proj

    def forward(self, query, key, value, need_weights=False):
        n, length, e = query.shape
        q, k, v = (t.reshape(n, length, self.heads, e // self.heads).transpose(1, 2)
                   for t in self.in_proj(query).chunk(3, -1))
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(y.transpose(1, 2).reshape(n, length, e)), None


VIT = {"image_size": 16, "patch_size": 8, "num_layers": 1, "num_heads": 2, "hidden_dim": 32, "mlp_dim": 64,
       "num_classes": 16}


def vit_case():
    """A one-block ViT (torchvision's VisionTransformer) in bfloat16 with every linear layer
    Float8Linear: the attention's in_proj and out_proj, the MLP's two, the head."""
    import torchvision
    torch.manual_seed(2)
    model = torchvision.models.VisionTransformer(**VIT)
    with torch.no_grad():  # torchvision zeroes the head; random, so its gradients carry back
        model.heads.head.weight.normal_(0.0, 0.05)
        model.heads.head.bias.normal_(0.0, 0.05)
    weights = {name: values(t) for name, t in model.state_dict().items()}
    model = model.to(torch.bfloat16)
    for block in model.encoder.layers:
        block.self_attention = Attention(block.self_attention)
    convert_to_float8_training(model)
    names = [name for name, m in model.named_modules() if type(m).__name__ == "Float8Linear"]
    x = torch.randn(2, 3, VIT["image_size"], VIT["image_size"]).to(torch.bfloat16).requires_grad_()
    y = model(x)
    grad_output = (torch.randn(y.shape) * 0.01).to(torch.bfloat16)
    y.backward(grad_output)
    grads = {}
    for name, p in model.named_parameters():
        grads[name.replace("self_attention.in_proj.weight", "self_attention.in_proj_weight")
              .replace("self_attention.in_proj.bias", "self_attention.in_proj_bias")] = values(p.grad)
    return {
        "options": VIT,
        "float8_layers": names,
        "weights": weights,
        "input_shape": list(x.shape),
        "input": values(x),
        "grad_output": values(grad_output),
        "output": values(y),
        "grad_input": values(x.grad),
        "grads": grads,
    }


def training_case(steps=20):
    torch.manual_seed(1)
    sizes = [32, 48, 64, 32, 10]
    model = mlp(sizes)
    initial = [{"weight": values(m.weight), "bias": values(m.bias)} for m in linears(model)]
    model = model.to(torch.bfloat16)
    # The masters start from the bfloat16 model, as mixt::MasterWeights makes them (after
    # the policy's setup() has cast the model).
    masters = [p.detach().float() for p in model.parameters()]
    last = str(len(model) - 1)
    convert_to_float8_training(model, module_filter_fn=lambda module, fqn: fqn not in ("0", last))
    optimizer = torch.optim.AdamW(masters, lr=0.01, weight_decay=0.01)
    batches, losses = [], []
    for _ in range(steps):
        x = torch.randn(8, sizes[0]) * 2
        labels = torch.randint(0, sizes[-1], (8,))
        batches.append({"input": values(x), "labels": labels.tolist()})
        optimizer.zero_grad()
        with torch.autocast("cpu", torch.bfloat16):
            loss = F.cross_entropy(model(x), labels)
        loss.backward()
        for master, p in zip(masters, model.parameters()):
            master.grad = p.grad.float()
            p.grad = None
        optimizer.step()
        with torch.no_grad():
            for master, p in zip(masters, model.parameters()):
                p.copy_(master)
        losses.append(loss.item())
    return {
        "sizes": sizes,
        "optimizer": {"name": "adamw", "lr": 0.01, "weight_decay": 0.01},
        "layers": initial,
        "batches": batches,
        "losses": losses,
        "masters": [values(m) for m in masters],
    }


def main():
    torch.set_num_threads(1)
    golden = {
        "torch": torch.__version__,
        "torchao": torchao.__version__,
        "layers": [layers_case(torch.bfloat16), layers_case(torch.float32)],
        "vit": vit_case(),
        "training": training_case(),
    }
    print(json.dumps(golden))


if __name__ == "__main__":
    main()
