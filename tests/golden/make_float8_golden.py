#!/usr/bin/env python3
"""Golden values for tests/sdk/helpers/float8_test.cpp, from torchao's float8 training itself.

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

- "delayed": the same 20 steps under fp8_delayed, against a reference of Transformer
  Engine's delayed scaling written here (torchao has none since 0.9): losses, every step's
  scales, the final masters, for two settings of amax_history_len, amax_compute and margin.

One thread, as the C++ test runs (the CPU matmuls' sums could otherwise be split
differently). Regenerate with
    python3 tests/golden/make_float8_golden.py > build/tests/float8_golden/float8.json
(ctest does, as the fixture float8_golden: the AdamW steps round differently from one CPU to
another, so the values are made on the machine the test runs on). torch._scaled_mm is
PyTorch's own CPU emulation on every CPU, as mixt's is (portable_scaled_mm.py says why).
"""
import json

import numpy  # noqa: F401  (values() prints through numpy's float32 repr)
import torch
import torch.nn.functional as F
import torchao
from torchao.float8 import Float8LinearConfig, convert_to_float8_training

import portable_scaled_mm


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


# --- Delayed scaling, as Transformer Engine documents it (DelayedScaling recipe,
# transformer_engine/pytorch/fp8.py): each tensor's amax goes into slot 0 of its history
# (the max over the step's forward passes; the output gradient's in backward); after the
# optimizer step, amax = max over the history ("max") or slot 0 ("most_recent"), the history
# rolls by -1 and slot 0 is zeroed, and scale = (fp8_max / amax) / 2^margin where amax is
# positive and finite (else the old scale). Scales start at 1. A reference of its own:
# torch ops in the order mixt's fp8_delayed uses them, the matmuls as torchao's.
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def to_float8(x, scale, dtype):
    m = torch.finfo(dtype).max
    return (x.to(torch.float32) * scale).clamp(min=-m, max=m).to(dtype)


def scaled_mm(a, a_scale, b, b_scale, dtype, fast):
    if not (a.stride(0) > a.stride(1) and a.stride(1) == 1):
        a = a.contiguous()
    if b.stride(0) > b.stride(1) and b.stride(1) == 1:
        b = b.t().contiguous().t()
    with torch.autocast("cpu", enabled=False):
        return torch._scaled_mm(a, b, scale_a=a_scale.reciprocal(), scale_b=b_scale.reciprocal(), out_dtype=dtype,
                                use_fast_accum=fast)


class DelayedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, state):
        history, scales = state
        x2 = x.reshape(-1, x.shape[-1])
        with torch.no_grad():
            history[0, 0] = torch.maximum(history[0, 0], x2.abs().max().float())
            history[1, 0] = torch.maximum(history[1, 0], weight.abs().max().float())
        x8 = to_float8(x2, scales[0], E4M3)
        w8 = to_float8(weight.t(), scales[1], E4M3)
        ctx.save_for_backward(x8, w8)
        ctx.state, ctx.shape = state, x.shape
        return scaled_mm(x8, scales[0], w8, scales[1], x.dtype, True).reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x8, w8 = ctx.saved_tensors
        history, scales = ctx.state
        g = grad.reshape(-1, grad.shape[-1])
        history[2, 0] = torch.maximum(history[2, 0], g.abs().max().float())
        g8 = to_float8(g, scales[2], E5M2)
        grad_input = scaled_mm(g8, scales[2], w8.t(), scales[1], g.dtype, False).reshape(ctx.shape)
        grad_weight = scaled_mm(g8.t(), scales[2], x8, scales[0], g.dtype, False)
        return grad_input, grad_weight, None


class DelayedLinear(torch.nn.Module):
    def __init__(self, linear, history_len):
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias
        self.history = torch.zeros(3, history_len)
        self.scales = torch.ones(3)

    def forward(self, x):
        if torch.is_autocast_enabled("cpu"):
            x = x.to(torch.get_autocast_dtype("cpu"))
        return DelayedMatmul.apply(x, self.weight, (self.history, self.scales)) + self.bias.to(x.dtype)

    @torch.no_grad()
    def update(self, amax_compute, margin):
        amax = self.history.max(dim=1).values if amax_compute == "max" else self.history[:, 0].clone()
        self.history.copy_(torch.roll(self.history, -1, 1))
        self.history[:, 0] = 0.0
        fp8_max = torch.tensor([torch.finfo(E4M3).max, torch.finfo(E4M3).max, torch.finfo(E5M2).max])
        new = (amax.reciprocal() * fp8_max) / (2.0 ** margin)
        self.scales.copy_(torch.where((amax > 0.0) & torch.isfinite(amax), new, self.scales))


def delayed_case(options, steps=20):
    torch.manual_seed(1)
    sizes = [32, 48, 64, 32, 10]
    model = mlp(sizes)
    initial = [{"weight": values(m.weight), "bias": values(m.bias)} for m in linears(model)]
    model = model.to(torch.bfloat16)
    masters = [p.detach().float() for p in model.parameters()]
    delayed = [DelayedLinear(model[i], options["amax_history_len"]) for i in (2, 4)]
    model[2], model[4] = delayed
    optimizer = torch.optim.AdamW(masters, lr=0.01, weight_decay=0.01)
    batches, losses, scales = [], [], []
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
        for layer in delayed:
            layer.update(options["amax_compute"], options["margin"])
        losses.append(loss.item())
        scales.append([values(layer.scales) for layer in delayed])
    return {"options": options, "sizes": sizes, "layers": initial, "batches": batches, "losses": losses,
            "scales": scales, "masters": [values(m) for m in masters]}


def main():
    torch.set_num_threads(1)
    portable_scaled_mm.install()
    golden = {
        "torch": torch.__version__,
        "torchao": torchao.__version__,
        "layers": [layers_case(torch.bfloat16), layers_case(torch.float32)],
        "vit": vit_case(),
        "training": training_case(),
        "delayed": [delayed_case({"amax_history_len": 4, "amax_compute": "max", "margin": 0}),
                    delayed_case({"amax_history_len": 16, "amax_compute": "most_recent", "margin": 1})],
    }
    print(json.dumps(golden))


if __name__ == "__main__":
    main()
