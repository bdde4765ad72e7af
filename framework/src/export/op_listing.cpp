#include "export/op_listing.h"

#include <map>

#include "export/onnx_translation.h"
#include "sdk/plugin_translations.h"
#include "mixt/error.h"

namespace mixt {

std::vector<TracedOp> traced_ops(const TracedModel& traced) {
  std::vector<TracedOp> ops;
  std::map<std::string, std::size_t> index;
  for (const torch::jit::Node* node : traced.graph->nodes()) {
    if (node->kind().is_prim()) continue;
    const std::string op = node->kind().toQualString();
    auto [at, added] = index.emplace(op, ops.size());
    if (added) {
      TracedOp traced_op{op, 0, traced_module_name(*node), {}, {}};
      if (const PluginTranslation* plugin = find_plugin_translation(op)) {
        traced_op.onnx = plugin->onnx;
        traced_op.source = plugin->plugin;
      } else if (const OnnxTranslation* entry = node->kind().is_aten() ? find_onnx_translation(op) : nullptr) {
        traced_op.onnx = entry->onnx;
        traced_op.source = "built in";
      }
      ops.push_back(std::move(traced_op));
    }
    ++ops[at->second].uses;
  }
  return ops;
}

std::string describe_traced_ops(const TracedModel& traced, std::int64_t opset) {
  const std::vector<TracedOp> ops = traced_ops(traced);
  std::string out = "| op | uses | ONNX | from | first in |\n|---|---:|---|---|---|\n";
  std::size_t missing = 0;
  for (const TracedOp& op : ops) {
    missing += op.onnx.empty();
    out += "| `" + op.aten + "` | " + std::to_string(op.uses) + " | " +
           (op.onnx.empty() ? std::string("no entry: refused") : op.onnx) + " | " + op.source + " | " +
           (op.first_module.empty() ? std::string("(outside the routed submodules)") : op.first_module) + " |\n";
  }
  out += std::to_string(ops.size()) + " kinds of op, " + std::to_string(missing) + " without a translation\n";
  try {
    translate_to_onnx(traced, opset);
    out += "at opset " + std::to_string(opset) + ": every op translates (mixt export -o model.onnx writes it)\n";
  } catch (const Error& e) {
    out += "at opset " + std::to_string(opset) + ": refused: " + e.message() + "\n";
  }
  return out;
}

}  // namespace mixt
