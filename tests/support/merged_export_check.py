#!/usr/bin/env python3
"""Measures a run's ONNX and TorchScript exports with its adapter unmerged and merged
(mixt export --merge-adapter), for tests/cli/lora_test.cpp. Only measures; the test decides.

    merged_export_check.py BASE.safetensors UNMERGED.onnx MERGED.onnx UNMERGED.pt MERGED.pt

Prints one JSON object:
  onnx_max_diff, torchscript_max_diff  the largest |merged - unmerged| of the outputs on the
                                       same random token ids (ONNX Runtime; torch.jit.load)
  max_abs                              the largest |output| (so that the difference has a scale)
  adapter_tensors                      {file: names holding "lora_"} of each file's weights
  changed_from_base                    {file: names whose tensor differs from BASE's of that name}
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper
from safetensors.torch import load_file

torch.set_num_threads(1)
base_file, unmerged_onnx, merged_onnx, unmerged_pt, merged_pt = sys.argv[1:6]
base = load_file(base_file)


def onnx_weights(path):
    return {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in onnx.load(path).graph.initializer}


def ids_for(path):
    model = onnx.load(path)
    length = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value or 16
    vocabulary = model.graph.output[0].type.tensor_type.shape.dim[-1].dim_value
    return np.random.default_rng(0).integers(0, vocabulary, size=(2, length), dtype=np.int64)


def run_onnx(path, ids):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: ids})[0]


ids = ids_for(unmerged_onnx)
a, b = run_onnx(unmerged_onnx, ids), run_onnx(merged_onnx, ids)
with torch.no_grad():
    ta = torch.jit.load(unmerged_pt)(torch.from_numpy(ids))
    tb = torch.jit.load(merged_pt)(torch.from_numpy(ids))
weights = {
    unmerged_onnx: onnx_weights(unmerged_onnx),
    merged_onnx: onnx_weights(merged_onnx),
    unmerged_pt: dict(torch.jit.load(unmerged_pt).state_dict()),
    merged_pt: dict(torch.jit.load(merged_pt).state_dict()),
}
print(json.dumps({
    "onnx_max_diff": float(np.abs(a - b).max()),
    "torchscript_max_diff": float((ta - tb).abs().max()),
    "max_abs": float(np.abs(a).max()),
    "adapter_tensors": {f: sorted(n for n in w if "lora_" in n) for f, w in weights.items()},
    "changed_from_base": {
        f: sorted(n for n, t in w.items() if n in base and not torch.equal(t.to(base[n].dtype), base[n]))
        for f, w in weights.items()
    },
}))
