#!/usr/bin/env python3
"""How much of what people trace mixt's ONNX op table translates, measured with PyTorch itself.

    python3 bench/export/onnx_op_coverage.py [--families classification,segmentation,detection,transformers]
                                             [--limit N] [--json OUT.json]

Traces, with torch.jit.trace in eval mode on the CPU, every model torchvision.models.list_models
returns for the classification, segmentation and detection modules (random weights, a small
input: 1 x 3 x 64 x 64, 224 for the models that need it; detection models' backbones, as
`model.backbone`), and transformers' GPT-2, Llama, BERT, ViT and Whisper encoder at small
random configurations. Lists the aten:: ops of each inlined graph (bookkeeping that export
never translates, aten::size, aten::Int and the like, is named and set aside) and compares
them with the table docs/deploy.md prints (which OnnxOpTable.DeployMdListsEveryEntry holds to
the table itself). Prints the ops by how many models use them, translated or not, and the
coverage: the share of (model, op) pairs and of distinct ops with a translation, and the
models every op of which translates. Nothing here decides a test; it measures.
"""
import argparse
import json
import re
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import torch

BOOKKEEPING = {"aten::size", "aten::Int", "aten::ScalarImplicit", "aten::floordiv", "aten::__getitem__",
               "aten::len", "aten::format", "aten::dim", "aten::numel", "aten::eq.int", "aten::Bool", "aten::Float",
               "aten::detach", "aten::alias", "aten::lift_fresh", "aten::item"}


def table_ops(root):
    text = (root / "docs" / "deploy.md").read_text()
    start = text.index("## The op table")
    return set(re.findall(r"^\| `(aten::[a-z_0-9]+)` \|", text[start:], re.MULTILINE))


def graph_ops(module, example):
    with torch.no_grad():
        traced = torch.jit.trace(module, example, check_trace=False, strict=False)
    graph = traced.inlined_graph
    return {node.kind() for node in graph.nodes() if node.kind().startswith("aten::")}


def torchvision_models(family):
    import torchvision
    module = {"classification": torchvision.models, "segmentation": torchvision.models.segmentation,
              "detection": torchvision.models.detection}[family]
    for name in torchvision.models.list_models(module=module):
        size = 224 if name.startswith(("vit_", "swin", "maxvit")) else 300 if name.startswith("ssd300") else 64
        if family == "segmentation":
            size = 96

        def build(name=name, family=family, size=size):
            extra = {} if family == "classification" else {"weights_backbone": None}
            model = torchvision.models.get_model(name, weights=None, **extra).eval()
            if family == "detection":
                model = model.backbone
            return model, torch.randn(1, 3, size, size)

        yield f"{family}/{name}", build


class Field(torch.nn.Module):
    """A transformers model called with one keyword input, one field of its output returned."""

    def __init__(self, model, key, field):
        super().__init__()
        self.model, self.key, self.field = model, key, field

    def forward(self, x):
        return getattr(self.model(**{self.key: x}), self.field)


def transformers_models():
    import transformers as tf

    def lm(config_class, model_class, field="logits", **kw):
        def build():
            config = config_class(**kw)
            config._attn_implementation = "sdpa"
            return Field(model_class(config).eval(), "input_ids", field), torch.randint(0, 90, (1, 12))
        return build

    yield "transformers/gpt2", lm(tf.GPT2Config, tf.GPT2LMHeadModel, vocab_size=96, n_positions=32, n_embd=32,
                                  n_layer=2, n_head=2, use_cache=False)
    yield "transformers/llama", lm(tf.LlamaConfig, tf.LlamaForCausalLM, vocab_size=96, hidden_size=32,
                                   intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=32, use_cache=False)
    yield "transformers/bert", lm(tf.BertConfig, tf.BertModel, "last_hidden_state", vocab_size=96, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)

    def vit():
        config = tf.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=64)
        return Field(tf.ViTModel(config).eval(), "pixel_values", "last_hidden_state"), torch.randn(1, 3, 32, 32)

    def whisper():
        config = tf.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64,
                                  num_mel_bins=16, max_source_positions=16, decoder_layers=1,
                                  decoder_attention_heads=2, decoder_ffn_dim=64, vocab_size=96, pad_token_id=0,
                                  bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
        encoder = tf.WhisperModel(config).get_encoder().eval()
        return Field(encoder, "input_features", "last_hidden_state"), torch.randn(1, 16, 32)

    yield "transformers/vit", vit
    yield "transformers/whisper_encoder", whisper


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default="classification,segmentation,detection,transformers")
    parser.add_argument("--limit", type=int, default=0, help="at most N models per family (0: all)")
    parser.add_argument("--json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(2)
    root = Path(__file__).resolve().parents[2]
    table = table_ops(root)
    uses = defaultdict(list)
    failed = {}
    per_model = {}
    for family in args.families.split(","):
        source = transformers_models() if family == "transformers" else torchvision_models(family)
        for count, (name, build) in enumerate(source):
            if args.limit and count >= args.limit:
                break
            try:
                model, example = build()
                ops = graph_ops(model, example) - BOOKKEEPING
            except Exception as e:  # a model the tracer cannot take is reported, not counted
                failed[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
                continue
            per_model[name] = sorted(ops)
            for op in ops:
                uses[op].append(name)
            print(f"{name}: {len(ops)} ops, {len(ops - table)} without a translation", file=sys.stderr)
    pairs = sum(len(v) for v in per_model.values())
    covered_pairs = sum(1 for ops in per_model.values() for op in ops if op in table)
    whole = [m for m, ops in per_model.items() if set(ops) <= table]
    print("| ATen op | models | translated |\n|---|---:|---|")
    for op, models in sorted(uses.items(), key=lambda item: (-len(item[1]), item[0])):
        print(f"| `{op}` | {len(models)} | {'yes' if op in table else 'no'} |")
    print(f"\n{len(per_model)} models traced ({len(failed)} not: {', '.join(sorted(failed)) or 'none'})")
    print(f"distinct ops: {sum(op in table for op in uses)} of {len(uses)} translated "
          f"({100.0 * sum(op in table for op in uses) / max(1, len(uses)):.1f} %)")
    print(f"(model, op) pairs: {covered_pairs} of {pairs} translated ({100.0 * covered_pairs / max(1, pairs):.1f} %)")
    print(f"models whose every op translates: {len(whole)} of {len(per_model)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"table": sorted(table), "models": per_model, "failed": failed}, indent=1))


if __name__ == "__main__":
    main()
