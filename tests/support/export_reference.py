#!/usr/bin/env python3
"""The references mixt export's files are held to, run by the C++ tests (export tests).

    export_reference.py MANIFEST.json RESULTS.json

MANIFEST is a JSON list of cases. Each case names files mixt wrote:
  name         the case's name, echoed back
  data         a safetensors file with input_bN (the inputs) and expected_bN (mixt's eager
               outputs) for each batch N in `batches`
  batches      e.g. [1, 3, 8]
  onnx         (optional) an ONNX file: onnx.checker.check_model(full_check=True), then
               ONNX Runtime's CPUExecutionProvider on each input (cast to float16 when the
               file's input is float16)
  torchscript  (optional) a TorchScript file: torch.jit.load, then its forward on each input
  load_library (optional) a shared library to load first (torch.ops.load_library): a plugin
               whose custom ops the TorchScript file calls
  safetensors  (optional) mixt's safetensors export of the same weights: every ONNX
               initializer must equal the tensor of its name
  torchvision  (optional) {"model": "resnet18", "kwargs": {...}}: torchvision's model with the
               safetensors weights, on each input
  transformers_gpt2
               (optional) mixt's gpt2 model section (a JSON object with vocab_size): transformers'
               GPT2LMHeadModel with the safetensors weights gives expected_bN itself, so `data`
               needs only the inputs (token ids; each batch may have its own sequence length)
  transformers_llama
               (optional) mixt's llama model section (tests/golden/make_llama_golden.py's
               keys): transformers' LlamaForCausalLM with the safetensors weights, likewise
Writes RESULTS.json, one JSON object: {name: {field: value}} with the largest absolute differences, the
checker's verdict, the initializer comparison and the files' metadata. The C++ test decides
what passes; this script only measures.
"""
import json
import sys

import numpy as np
import torch
from safetensors.torch import load_file

torch.set_num_threads(1)


def max_diff(a, b):
    a = torch.as_tensor(a).double()
    b = torch.as_tensor(b).double()
    if a.shape != b.shape:
        return f"shape {list(a.shape)} vs {list(b.shape)}"
    return float((a - b).abs().max()) if a.numel() else 0.0


def worst(values):
    numbers = [v for v in values if isinstance(v, float)]
    texts = [v for v in values if not isinstance(v, float)]
    return texts[0] if texts else max(numbers)


def check_onnx(case, data, out):
    import onnx
    import onnxruntime as ort

    model = onnx.load(case["onnx"])
    try:
        onnx.checker.check_model(model, full_check=True)
        out["checker"] = "ok"
    except Exception as e:  # the verdict is the result
        out["checker"] = str(e).splitlines()[0]
    out["opset"] = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    out["metadata"] = {p.key: p.value for p in model.metadata_props}
    out["producer"] = model.producer_name
    out["inputs"] = [
        [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input
    ]
    out["initializer_names"] = [t.name for t in model.graph.initializer]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(case["onnx"], options, providers=["CPUExecutionProvider"])
    half = model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    out["input_dtype"] = "float16" if half else "float32"
    diffs = []
    for b in case["batches"]:
        x = data[f"input_b{b}"].numpy()
        (y,) = session.run(["output"], {"input": x.astype(np.float16) if half else x})
        diffs.append(max_diff(y, data[f"expected_b{b}"]))
    out["onnx_max_diff"] = worst(diffs)
    if "safetensors" in case:
        from onnx import numpy_helper

        weights = load_file(case["safetensors"])
        mismatched = []
        for t in model.graph.initializer:
            value = torch.from_numpy(numpy_helper.to_array(t).copy())
            if t.name not in weights or not torch.equal(value, weights[t.name]):
                mismatched.append(t.name)
        out["initializers_checked"] = len(model.graph.initializer)
        out["initializers_mismatched"] = mismatched


def check_torchscript(case, data, out):
    if case.get("load_library"):
        torch.ops.load_library(case["load_library"])
    extra = {"mixt.json": ""}
    module = torch.jit.load(case["torchscript"], _extra_files=extra)
    out["torchscript_metadata"] = json.loads(extra["mixt.json"]) if extra["mixt.json"] else None
    out["torchscript_state_dict"] = sorted(module.state_dict().keys())
    diffs = []
    with torch.no_grad():
        for b in case["batches"]:
            diffs.append(max_diff(module(data[f"input_b{b}"]), data[f"expected_b{b}"]))
    out["torchscript_max_diff"] = worst(diffs)


def check_torchvision(case, data, out):
    import torchvision

    spec = case["torchvision"]
    builder = (getattr(torchvision.models, spec["model"], None) or
               getattr(torchvision.models.segmentation, spec["model"], None) or
               getattr(torchvision.models.vision_transformer, spec["model"]))
    model = builder(**spec.get("kwargs", {}))
    model.load_state_dict(load_file(case["safetensors"]))
    model.eval()
    diffs = []
    with torch.no_grad():
        for b in case["batches"]:
            output = model(data[f"input_b{b}"])
            if isinstance(output, dict):  # a segmentation model's {"out": logits}
                output = output["out"]
            diffs.append(max_diff(output, data[f"expected_b{b}"]))
    out["torchvision_max_diff"] = worst(diffs)


def transformers_gpt2_expected(case, data):
    """GPT2LMHeadModel's logits on each input, from mixt's safetensors (the tied head left out)."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
    from make_gpt2_golden import config_of
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel(config_of(case["transformers_gpt2"])).eval()
    missing, unexpected = model.load_state_dict(load_file(case["safetensors"]), strict=False)
    if list(missing) != ["lm_head.weight"] or unexpected:
        raise ValueError(f"names differ from GPT2LMHeadModel's: missing {missing}, unexpected {unexpected}")
    with torch.no_grad():
        for b in case["batches"]:
            data[f"expected_b{b}"] = model(input_ids=data[f"input_b{b}"]).logits


def transformers_llama_expected(case, data):
    """LlamaForCausalLM's logits on each input, from mixt's safetensors (a tied head left out)."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
    from make_llama_golden import config_of
    from transformers import LlamaForCausalLM

    section = case["transformers_llama"]
    model = LlamaForCausalLM(config_of(section)).eval()
    missing, unexpected = model.load_state_dict(load_file(case["safetensors"]), strict=False)
    expected_missing = ["lm_head.weight"] if section["tie_embeddings"] else []
    if list(missing) != expected_missing or unexpected:
        raise ValueError(f"names differ from LlamaForCausalLM's: missing {missing}, unexpected {unexpected}")
    with torch.no_grad():
        for b in case["batches"]:
            data[f"expected_b{b}"] = model(input_ids=data[f"input_b{b}"]).logits


def main():
    cases = json.load(open(sys.argv[1]))
    results = {}
    for case in cases:
        out = {}
        try:
            data = load_file(case["data"])
            if "transformers_gpt2" in case:
                transformers_gpt2_expected(case, data)
            if "transformers_llama" in case:
                transformers_llama_expected(case, data)
            out["expected_max_abs"] = max(float(data[f"expected_b{b}"].abs().max()) for b in case["batches"])
            if "onnx" in case:
                check_onnx(case, data, out)
            if "torchscript" in case:
                check_torchscript(case, data, out)
            if "torchvision" in case:
                check_torchvision(case, data, out)
        except Exception as e:  # reported, the C++ test fails the case
            out["error"] = f"{type(e).__name__}: {e}"
        results[case["name"]] = out
    with open(sys.argv[2], "w") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main()
