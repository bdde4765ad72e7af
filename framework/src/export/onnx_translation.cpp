#include "export/onnx_translation.h"

#include "export/onnx_op_table.h"
#include "export/plugin_onnx_op.h"
#include "sdk/plugin_translations.h"
#include "mixt/error.h"

namespace mixt {

std::string traced_module_name(const torch::jit::Node& node) {
  const torch::jit::ScopePtr scope = const_cast<torch::jit::Node&>(node).scope();  // scope() is not const
  if (!scope || scope->isBlank()) return "";
  return scope->name().toUnqualString();
}

namespace {

// "in module 'layer1.0'": the innermost submodule the model routed the op's call through.
std::string module_of(const torch::jit::Node& node) {
  const std::string name = traced_module_name(node);
  if (name.empty()) {
    return "outside the model's routed submodules (routing a child through mixt::call_submodule names it here)";
  }
  return "in module '" + name + "'";
}

[[noreturn]] void refuse(const torch::jit::Node& node, std::int64_t opset, const std::string& why) {
  const std::string op = node.kind().toQualString();
  throw usage_error(
      "cannot export to ONNX: " + op + " " + module_of(node) + " at opset " + std::to_string(opset) + ": " + why,
      "export --format torchscript (it needs no translation), change the forward to use ops the "
      "table translates (docs/deploy.md lists them), or translate " +
          op + " in the model's plugin (Registrar::add_onnx_translation, docs/plugins.md)");
}

// One translation's state: the ONNX graph being built, the model's parameters and buffers
// by name, and what each value of the traced graph has become in the ONNX graph.
class Translation {
 public:
  Translation(const TracedModel& traced, std::int64_t opset)
      : opset_(opset), builder_(opset), out_(builder_.graph()), result_{builder_.shared_graph(), {}} {
    for (const auto& item : traced.module.named_parameters(/*recurse=*/true)) state_[item.name] = item.value;
    for (const auto& item : traced.module.named_buffers(/*recurse=*/true)) state_[item.name] = item.value;
  }

  // The traced graph's inputs: the module itself (the root of the GetAttr paths), then the input.
  void add_inputs(const torch::jit::Graph& graph) {
    paths_[graph.inputs().at(0)] = "";
    Value* input = out_.addInput("input");
    input->setType(graph.inputs().at(1)->type());
    tensors_[graph.inputs().at(1)] = input;
  }

  void translate(const torch::jit::Node* node) {
    const c10::Symbol kind = node->kind();
    if (kind == c10::prim::Constant) return;  // read by the entries that take them
    if (kind == c10::prim::GetAttr) {
      get_attr(node);
    } else if (kind == c10::prim::ListConstruct) {
      list_construct(node);
    } else if (kind == c10::prim::ListUnpack) {
      list_unpack(node);
    } else if (kind == c10::prim::NumToTensor) {
      same_value(node);  // a traced size as a tensor: both are int64 0-D tensors in ONNX
    } else {
      aten_op(node);
    }
  }

  void add_output(const torch::jit::Graph& graph) {
    if (graph.outputs().size() != 1 || !tensors_.count(graph.outputs()[0])) {
      throw usage_error("cannot export to ONNX: the forward must return one tensor");
    }
    Value* output = tensors_.at(graph.outputs()[0]);
    if (output->node()->kind() == c10::prim::Param || output->node()->kind() == c10::onnx::Constant) {
      output = builder_.op("Identity", {output});
    }
    output->setDebugName("output");
    output->setType(graph.outputs()[0]->type());
    out_.registerOutput(output);
  }

  // Unused nodes (constants an entry made and did not need): ONNX ops have no side effects.
  // (torch::jit::EliminateDeadCode asks the alias analysis, which knows no onnx:: schema.)
  void remove_unused() {
    for (auto it = out_.nodes().rbegin(); it != out_.nodes().rend();) {
      torch::jit::Node* node = *it;
      ++it;
      bool used = false;
      for (const Value* v : node->outputs()) used = used || v->hasUses();
      if (!used) node->destroy();
    }
    for (std::size_t i = out_.inputs().size(); i-- > 1;) {
      if (!out_.inputs()[i]->hasUses()) {
        result_.initializers.erase(out_.inputs()[i]->debugName());
        out_.eraseInput(i);
      }
    }
  }

  OnnxGraph take_result() { return std::move(result_); }

 private:
  // A module path; a tensor attribute becomes a graph input and an initializer.
  void get_attr(const torch::jit::Node* node) {
    const std::string parent = paths_.at(node->input(0));
    const std::string path = (parent.empty() ? "" : parent + ".") + node->s(c10::attr::name);
    paths_[node->output()] = path;
    if (node->output()->type()->isSubtypeOf(*c10::TensorType::get())) {
      const auto found = state_.find(path);
      if (found == state_.end()) refuse(*node, opset_, "no parameter or buffer named " + path);
      Value* parameter = out_.addInput(path);
      parameter->setType(c10::TensorType::create(found->second));
      tensors_[node->output()] = parameter;
      result_.initializers[path] = found->second.detach().contiguous();
    }
  }

  void same_value(const torch::jit::Node* node) {
    const auto found = tensors_.find(node->input(0));
    if (found == tensors_.end()) refuse(*node, opset_, "its input is not a value the trace computed");
    tensors_[node->output()] = found->second;
  }

  // A list of tensors, some of them perhaps None (aten::index's Tensor?[]: null there). A
  // list of ints, traced sizes among them, is read by the op that takes it (AtenNode::int_list).
  void list_construct(const torch::jit::Node* node) {
    if (node->output()->type()->isSubtypeOf(*c10::ListType::ofInts())) return;
    std::vector<Value*> items;
    std::size_t tensors = 0, nones = 0;
    for (const Value* item : node->inputs()) {
      if (auto found = tensors_.find(item); found != tensors_.end()) {
        items.push_back(found->second);
        ++tensors;
      } else if (item->mustBeNone()) {
        items.push_back(nullptr);
        ++nones;
      }
    }
    if (tensors > 0) {
      if (tensors + nones != node->inputs().size()) refuse(*node, opset_, "a list of tensors and other values");
      lists_[node->output()] = items;
    }
  }

  void list_unpack(const torch::jit::Node* node) {
    const auto found = lists_.find(node->input(0));
    if (found == lists_.end() || found->second.size() != node->outputs().size()) {
      refuse(*node, opset_, "unpacks a list the trace did not record");
    }
    for (std::size_t i = 0; i < node->outputs().size(); ++i) tensors_[node->outputs()[i]] = found->second[i];
  }

  // An op, through a plugin's translation of it or else the op table's entry.
  void aten_op(const torch::jit::Node* node) {
    const c10::Symbol kind = node->kind();
    const PluginTranslation* plugin = kind.is_prim() ? nullptr : find_plugin_translation(kind.toQualString());
    const OnnxTranslation* entry = !plugin && kind.is_aten() ? find_onnx_translation(kind.toQualString()) : nullptr;
    if (!plugin && !entry) refuse(*node, opset_, "the op table has no entry for it, nor a plugin a translation");
    AtenNode aten(node, builder_, tensors_, lists_);
    try {
      if (plugin) {
        run_plugin_translation(*plugin, aten, builder_);
      } else {
        entry->translate(aten, builder_);
      }
    } catch (const Untranslatable& e) {
      refuse(*node, opset_, e.why);
    }
    for (std::size_t i = 0; i < node->outputs().size(); ++i) {
      const Value* traced_output = node->outputs()[i];
      if (traced_output->type()->kind() == c10::TypeKind::ListType) {
        lists_[traced_output] = aten.output_list();
      } else if (aten.outputs()[i]) {
        tensors_[traced_output] = aten.outputs()[i];
      } else {
        refuse(*node, opset_, "its entry gave no value for output " + std::to_string(i));
      }
    }
  }

  std::int64_t opset_;
  OnnxBuilder builder_;
  torch::jit::Graph& out_;
  OnnxGraph result_;
  std::map<std::string, at::Tensor> state_;
  std::map<const Value*, Value*> tensors_;
  std::map<const Value*, std::vector<Value*>> lists_;
  std::map<const Value*, std::string> paths_;  // module paths of prim::GetAttr chains
};

}  // namespace

OnnxGraph translate_to_onnx(const TracedModel& traced, std::int64_t opset) {
  Translation translation(traced, opset);
  const torch::jit::Graph& graph = *traced.graph;
  translation.add_inputs(graph);
  for (const torch::jit::Node* node : graph.nodes()) translation.translate(node);
  translation.add_output(graph);
  translation.remove_unused();
  return translation.take_result();
}

}  // namespace mixt
