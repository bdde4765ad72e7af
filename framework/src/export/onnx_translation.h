// A traced model's graph (export/traced_model.h) as an ONNX graph: each ATen node through
// its entry of the op table (export/onnx_op_table.h), parameters as initializers under the
// model's own names, the input's batch dimension symbolic.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "export/traced_model.h"

namespace mixt {

struct OnnxGraph {
  // onnx:: nodes only. Inputs: "input", then one per parameter or buffer the forward reads,
  // named as the model names it; one output, "output".
  std::shared_ptr<torch::jit::Graph> graph;
  std::map<std::string, at::Tensor> initializers;
};

// A usage error (exit 2) for an op without an entry, or an entry that cannot express this
// use of its op: it names the op, the module the tracer recorded it in, and the opset.
OnnxGraph translate_to_onnx(const TracedModel& traced, std::int64_t opset);

// The innermost submodule the model routed a traced node's call through ("layer1.0"), or ""
// for a node outside every routed submodule.
std::string traced_module_name(const torch::jit::Node& node);

}  // namespace mixt
