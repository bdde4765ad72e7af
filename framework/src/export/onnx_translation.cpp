#include "export/onnx_translation.h"

#include "export/onnx_op_table.h"
#include "mixt/error.h"

namespace mixt {

namespace {

// "in module 'layer1.0'": the innermost submodule the model routed the op's call through.
std::string module_of(const torch::jit::Node& node) {
  const torch::jit::ScopePtr scope = const_cast<torch::jit::Node&>(node).scope();  // scope() is not const
  if (!scope || scope->isBlank()) {
    return "outside the model's routed submodules (routing a child through mixt::call_submodule names it here)";
  }
  return "in module '" + std::string(scope->name().toUnqualString()) + "'";
}

[[noreturn]] void refuse(const torch::jit::Node& node, std::int64_t opset, const std::string& why) {
  const std::string op = node.kind().toQualString();
  throw usage_error(
      "cannot export to ONNX: " + op + " " + module_of(node) + " at opset " + std::to_string(opset) + ": " + why,
      "export --format torchscript (it needs no translation), change the forward to use ops the "
      "table translates (docs/deploy.md lists them), or add an entry for " +
          op + " to framework/src/export/onnx_op_table.cpp");
}

}  // namespace

OnnxGraph translate_to_onnx(const TracedModel& traced, std::int64_t opset) {
  OnnxBuilder builder(opset);
  torch::jit::Graph& out = builder.graph();
  OnnxGraph result{builder.shared_graph(), {}};

  std::map<std::string, at::Tensor> state;
  for (const auto& item : traced.module.named_parameters(/*recurse=*/true)) state[item.name] = item.value;
  for (const auto& item : traced.module.named_buffers(/*recurse=*/true)) state[item.name] = item.value;

  std::map<const Value*, Value*> tensors;
  std::map<const Value*, std::vector<Value*>> lists;
  std::map<const Value*, std::string> paths;  // module paths of prim::GetAttr chains

  const torch::jit::Graph& graph = *traced.graph;
  paths[graph.inputs().at(0)] = "";
  Value* input = out.addInput("input");
  input->setType(graph.inputs().at(1)->type());
  tensors[graph.inputs().at(1)] = input;

  for (const torch::jit::Node* node : graph.nodes()) {
    const c10::Symbol kind = node->kind();
    if (kind == c10::prim::Constant) continue;  // read by the entries that take them
    if (kind == c10::prim::GetAttr) {
      const std::string parent = paths.at(node->input(0));
      const std::string path = (parent.empty() ? "" : parent + ".") + node->s(c10::attr::name);
      paths[node->output()] = path;
      if (node->output()->type()->isSubtypeOf(*c10::TensorType::get())) {
        const auto found = state.find(path);
        if (found == state.end()) refuse(*node, opset, "no parameter or buffer named " + path);
        Value* parameter = out.addInput(path);
        parameter->setType(c10::TensorType::create(found->second));
        tensors[node->output()] = parameter;
        result.initializers[path] = found->second.detach().contiguous();
      }
      continue;
    }
    if (kind == c10::prim::ListConstruct) {
      std::vector<Value*> items;
      for (const Value* item : node->inputs()) {
        if (auto found = tensors.find(item); found != tensors.end()) items.push_back(found->second);
      }
      if (!items.empty()) {
        if (items.size() != node->inputs().size()) refuse(*node, opset, "a list of tensors and other values");
        lists[node->output()] = items;
      }
      continue;
    }
    if (kind == c10::prim::ListUnpack) {
      const auto found = lists.find(node->input(0));
      if (found == lists.end() || found->second.size() != node->outputs().size()) {
        refuse(*node, opset, "unpacks a list the trace did not record");
      }
      for (std::size_t i = 0; i < node->outputs().size(); ++i) tensors[node->outputs()[i]] = found->second[i];
      continue;
    }
    const OnnxTranslation* entry = kind.is_aten() ? find_onnx_translation(kind.toQualString()) : nullptr;
    if (!entry) refuse(*node, opset, "the op table has no entry for it");
    AtenNode aten(node, builder, tensors, lists);
    try {
      entry->translate(aten, builder);
    } catch (const Untranslatable& e) {
      refuse(*node, opset, e.why);
    }
    for (std::size_t i = 0; i < node->outputs().size(); ++i) {
      const Value* traced_output = node->outputs()[i];
      if (traced_output->type()->kind() == c10::TypeKind::ListType) {
        lists[traced_output] = aten.output_list();
      } else if (aten.outputs()[i]) {
        tensors[traced_output] = aten.outputs()[i];
      } else {
        refuse(*node, opset, "its entry gave no value for output " + std::to_string(i));
      }
    }
  }

  if (graph.outputs().size() != 1 || !tensors.count(graph.outputs()[0])) {
    throw usage_error("cannot export to ONNX: the forward must return one tensor");
  }
  Value* output = tensors.at(graph.outputs()[0]);
  if (output->node()->kind() == c10::prim::Param || output->node()->kind() == c10::onnx::Constant) {
    output = builder.op("Identity", {output});
  }
  output->setDebugName("output");
  output->setType(graph.outputs()[0]->type());
  out.registerOutput(output);

  // Unused nodes (constants an entry made and did not need): ONNX ops have no side effects.
  // (torch::jit::EliminateDeadCode asks the alias analysis, which knows no onnx:: schema.)
  for (auto it = out.nodes().rbegin(); it != out.nodes().rend();) {
    torch::jit::Node* node = *it;
    ++it;
    bool used = false;
    for (const Value* v : node->outputs()) used = used || v->hasUses();
    if (!used) node->destroy();
  }
  for (std::size_t i = out.inputs().size(); i-- > 1;) {
    if (!out.inputs()[i]->hasUses()) {
      result.initializers.erase(out.inputs()[i]->debugName());
      out.eraseInput(i);
    }
  }
  return result;
}

}  // namespace mixt
