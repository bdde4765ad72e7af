#include "export/op_listing.h"

#include <map>

#include "export/onnx_translation.h"
#include "mixt/error.h"

namespace mixt {

std::vector<TracedOp> traced_ops(const TracedModel& traced) {
  std::vector<TracedOp> ops;
  std::map<std::string, std::size_t> index;
  for (const torch::jit::Node* node : traced.graph->nodes()) {
    if (!node->kind().is_aten()) continue;
    const std::string aten = node->kind().toQualString();
    auto [at, added] = index.emplace(aten, ops.size());
    if (added) ops.push_back({aten, 0, traced_module_name(*node), find_onnx_translation(aten)});
    ++ops[at->second].uses;
  }
  return ops;
}

std::string describe_traced_ops(const TracedModel& traced, std::int64_t opset) {
  const std::vector<TracedOp> ops = traced_ops(traced);
  std::string out = "| ATen op | uses | ONNX | first in |\n|---|---:|---|---|\n";
  std::size_t missing = 0;
  for (const TracedOp& op : ops) {
    missing += op.translation == nullptr;
    out += "| `" + op.aten + "` | " + std::to_string(op.uses) + " | " +
           (op.translation ? std::string(op.translation->onnx) : std::string("no entry: refused")) + " | " +
           (op.first_module.empty() ? std::string("(outside the routed submodules)") : op.first_module) + " |\n";
  }
  out += std::to_string(ops.size()) + " kinds of ATen op, " + std::to_string(missing) + " without an entry\n";
  try {
    translate_to_onnx(traced, opset);
    out += "at opset " + std::to_string(opset) + ": every op translates (mixt export -o model.onnx writes it)\n";
  } catch (const Error& e) {
    out += "at opset " + std::to_string(opset) + ": refused: " + e.message() + "\n";
  }
  return out;
}

}  // namespace mixt
