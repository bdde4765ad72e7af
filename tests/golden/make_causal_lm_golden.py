#!/usr/bin/env python3
"""Golden next-token losses for tests/plugins/tasks/causal_lm_test.cpp, from PyTorch.

What nanoGPT's GPT.forward computes for its training loss:
    F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
(mean over every position), with and without label smoothing, and over a whole evaluation
of two batches the loss per token and its exponential, the perplexity. Regenerate with
    python3 tests/golden/make_causal_lm_golden.py > tests/golden/causal_lm.json
"""
import json
import math

import torch
import torch.nn.functional as F

g = torch.Generator().manual_seed(43)
batches = []
total_loss, total_tokens = 0.0, 0
for batch, time, vocab in [(2, 5, 11), (3, 5, 11)]:
    logits = torch.randn(batch, time, vocab, generator=g)
    targets = torch.randint(0, vocab, (batch, time), generator=g)
    flat_logits, flat_targets = logits.view(-1, vocab), targets.view(-1)
    batches.append({
        "logits": logits.tolist(),
        "targets": targets.tolist(),
        "loss": F.cross_entropy(flat_logits, flat_targets).item(),
        "loss_smoothed_0.1": F.cross_entropy(flat_logits, flat_targets, label_smoothing=0.1).item(),
    })
    total_loss += F.cross_entropy(flat_logits.double(), flat_targets, reduction="sum").item()
    total_tokens += targets.numel()

print(json.dumps({
    "torch": torch.__version__,
    "batches": batches,
    "evaluation_loss": total_loss / total_tokens,
    "evaluation_perplexity": math.exp(total_loss / total_tokens),
}))
