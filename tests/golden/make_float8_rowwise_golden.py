#!/usr/bin/env python3
"""Golden values for tests/sdk/helpers/float8_test.cpp, from torchao's float8 training itself.

torchao 0.18's recipe "rowwise" (`Float8LinearConfig.from_recipe_name("rowwise")`: per-row
(axiswise) scales rounded down to a power of two, e4m3 for input, weight and output
gradient) needs CUDA's rowwise torch._scaled_mm; torch 2.11's CPU _scaled_mm takes
per-tensor scales only. So the reference is the same config with `emulate=True`, torchao's
own emulation: its casts (tensor_to_scale, to_fp8_saturated) and, in place of _scaled_mm,
torch.mm(a._data.float() / a._scale, b._data.float() / b._scale).to(output dtype). mixt's
fp8_rowwise on the CPU (mixt/helpers/float8.h) must match it bit for bit:

- "layers": a small MLP whose three linear layers are all Float8Linear, with fixed
  weights, input and output gradient, in bfloat16 and in float32: forward output, input
  gradient, weight and bias gradients.
- "training": 20 AdamW steps of a 4-layer MLP trained as fp8_rowwise trains it (a bfloat16
  model under autocast(bfloat16) whose middle two linear layers are Float8Linear, float32
  master weights updated by torch.optim.AdamW and rounded into the model after each step):
  the loss of every step and the final masters.

The script also checks that a plain restatement of the recipe (written below with torchao's
tensor_to_scale) gives the same numbers as torchao's Float8Linear, so the JSON says what the
recipe computes rather than an accident of its tensor subclass.

One thread, as the C++ test runs. Regenerate with
    python3 tests/golden/make_float8_rowwise_golden.py > build/tests/float8_golden/float8_rowwise.json
(ctest does, as the fixture float8_golden: the AdamW steps round differently from one CPU to
another, so the values are made on the machine the test runs on)
"""
import dataclasses
import json

import torch
import torch.nn.functional as F
import torchao
from torchao.float8 import Float8LinearConfig, convert_to_float8_training
from torchao.float8.config import ScalingGranularity
from torchao.float8.float8_utils import tensor_to_scale, to_fp8_saturated

from make_float8_golden import linears, mlp, values

E4M3 = torch.float8_e4m3fn
CONFIG = dataclasses.replace(Float8LinearConfig.from_recipe_name("rowwise"), emulate=True)
assert CONFIG.round_scales_to_power_of_2 and CONFIG.cast_config_grad_output.target_dtype == E4M3


def layers_case(dtype):
    torch.manual_seed(0)
    sizes = [32, 64, 48, 16]
    model = mlp(sizes).to(dtype)
    initial = [{"weight": values(m.weight), "bias": values(m.bias)} for m in linears(model)]
    plain = [(m.weight.detach().clone(), m.bias.detach().clone()) for m in linears(model)]
    convert_to_float8_training(model, config=CONFIG)
    x = (torch.randn(4, 8, sizes[0]) * 3).to(dtype).requires_grad_()
    y = model(x)
    grad_output = (torch.randn(y.shape) * 0.01).to(dtype)
    y.backward(grad_output)
    check_restatement(plain, x.detach(), grad_output, y, x.grad, [m.weight.grad for m in linears(model)])
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


# --- The recipe restated: each operand cast along the dimension its matmul sums over.
def cast(t, dim):
    scale = tensor_to_scale(t, E4M3, scaling_granularity=ScalingGranularity.AXISWISE, axiswise_dim=dim,
                            round_scales_to_power_of_2=True)
    return to_fp8_saturated(t.to(torch.float32) * scale, E4M3), scale


def mm(a, b, dtype):
    (a8, a_scale), (b8, b_scale) = a, b
    return torch.mm(a8.float() / a_scale, b8.float() / b_scale).to(dtype)


class RowwiseMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        x2 = x.reshape(-1, x.shape[-1])
        return mm(cast(x2, -1), cast(weight.t(), 0), x.dtype).reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])
        w8, w_scale = cast(weight.t(), -1)
        grad_input = mm(cast(g, -1), (w8.t(), w_scale.t()), g.dtype).reshape(x.shape)
        g8, g_scale = cast(g, 0)
        grad_weight = mm((g8.t(), g_scale.t()), cast(x.reshape(-1, x.shape[-1]), 0), g.dtype)
        return grad_input, grad_weight


def check_restatement(plain, x, grad_output, output, grad_input, weight_grads):
    x = x.clone().requires_grad_()
    params = [(w.clone().requires_grad_(), b.clone().requires_grad_()) for w, b in plain]
    h = x
    for i, (w, b) in enumerate(params):
        h = RowwiseMatmul.apply(h, w) + b.to(h.dtype)
        if i + 1 < len(params):
            h = torch.relu(h)
    h.backward(grad_output)
    assert torch.equal(h, output) and torch.equal(x.grad, grad_input)
    assert all(torch.equal(w.grad, g) for (w, _), g in zip(params, weight_grads))


def training_case(steps=20):
    torch.manual_seed(1)
    sizes = [32, 48, 64, 32, 10]
    model = mlp(sizes)
    initial = [{"weight": values(m.weight), "bias": values(m.bias)} for m in linears(model)]
    model = model.to(torch.bfloat16)
    masters = [p.detach().float() for p in model.parameters()]
    last = str(len(model) - 1)
    convert_to_float8_training(model, config=CONFIG, module_filter_fn=lambda module, fqn: fqn not in ("0", last))
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
        "recipe": "rowwise, emulate=True",
        "layers": [layers_case(torch.bfloat16), layers_case(torch.float32)],
        "training": training_case(),
    }
    print(json.dumps(golden))


if __name__ == "__main__":
    main()
