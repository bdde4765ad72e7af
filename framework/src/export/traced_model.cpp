#include "export/traced_model.h"

#include <ATen/autocast_mode.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "mixt/error.h"

namespace mixt {

namespace {

// "mixt::models::ResNetImpl" -> "__torch__.mixt.models.ResNetImpl": a qualified name
// torch.jit.load accepts (one identifier per dot).
std::string class_name(const torch::nn::Module& module) {
  std::string out = "__torch__.";
  bool dot = false;
  for (char c : module.name()) {
    const bool identifier = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (identifier) {
      if (dot && out.back() != '.') out += '.';
      dot = false;
      out += c;
    } else if (c == ':') {
      dot = true;
    }
  }
  return out;
}

// `prefix`: the module's name in the model with its dot ("layer1.0."), for `left_out`.
torch::jit::Module mirror(const torch::nn::Module& module, const std::shared_ptr<torch::jit::CompilationUnit>& unit,
                          const std::string& prefix, const std::set<std::string>& left_out) {
  torch::jit::Module mirrored(c10::QualifiedName(class_name(module)), unit, /*shouldMangle=*/true);
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (item.value().defined() && !left_out.count(prefix + item.key())) {
      mirrored.register_parameter(item.key(), item.value(), /*is_buffer=*/false);
    }
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (item.value().defined()) mirrored.register_buffer(item.key(), item.value());
  }
  for (const auto& item : module.named_children()) {
    mirrored.register_module(item.key(), mirror(*item.value(), unit, prefix + item.key() + ".", left_out));
  }
  mirrored.eval();
  return mirrored;
}

// Autocast off for the trace (a precision policy's region must not leak into the file).
struct AutocastOff {
  bool cpu = at::autocast::is_autocast_enabled(at::kCPU);
  AutocastOff() { at::autocast::set_autocast_enabled(at::kCPU, false); }
  ~AutocastOff() { at::autocast::set_autocast_enabled(at::kCPU, cpu); }
};

}  // namespace

TracedModel trace_model(const torch::nn::Module& model, const std::function<at::Tensor(const at::Tensor&)>& forward,
                        const at::Tensor& example, const std::set<std::string>& left_out) {
  at::NoGradGuard no_grad;
  AutocastOff autocast_off;
  auto unit = std::make_shared<torch::jit::CompilationUnit>();
  TracedModel traced{mirror(model, unit, "", left_out), nullptr};
  auto [state, outputs] = torch::jit::tracer::trace(
      {example},
      [&forward](torch::jit::Stack inputs) -> torch::jit::Stack { return {forward(inputs.at(0).toTensor())}; },
      [](const at::Tensor&) { return std::string(); }, /*strict=*/true, /*force_outplace=*/false, &traced.module);
  (void)outputs;
  traced.graph = state->graph;
  traced.graph->inputs().at(1)->setDebugName("input");
  auto function = unit->create_function(c10::QualifiedName(*traced.module.type()->name(), "forward"), traced.graph);
  traced.module.type()->addMethod(function);
  return traced;
}

double check_other_sizes(TracedModel& traced, const std::function<at::Tensor(const at::Tensor&)>& forward,
                         const at::Tensor& example, const InputMaker& make_input, VariedAxis axis,
                         const std::vector<std::int64_t>& sizes) {
  at::NoGradGuard no_grad;
  AutocastOff autocast_off;
  const std::size_t dim = axis.dim;
  const std::string& what = axis.words;
  const std::string hint =
      dim == 0 ? "write the forward without x.size(0) in shapes: x.flatten(1) for view({x.size(0), -1}), "
                 "t.unflatten(-1, {heads, -1}) for reshape({n, l, heads, d}) (docs/plugins.md, \"Exportable forwards\")"
               : "write the forward without x.size(" + std::to_string(dim) +
                     ") in shapes or arange: count positions from the input (as gpt2 does), unflatten the last "
                     "dimension, upsample to an image's size with mixt::upsample_bilinear_like (docs/plugins.md, "
                     "\"Exportable forwards\")";
  double worst = 0.0;
  for (std::int64_t size : sizes) {
    std::vector<std::int64_t> shape = example.sizes().vec();
    shape.at(dim) = size;
    at::manual_seed(size);
    const at::Tensor x = make_input(shape);
    const at::Tensor expected = forward(x);
    const std::string where = what + " " + std::to_string(size);
    at::Tensor got;
    try {
      got = traced.module.forward({x}).toTensor();
    } catch (const std::exception& e) {
      throw usage_error("the traced forward fails at " + where + " (traced at " + std::to_string(example.size(dim)) +
                            "): the model's forward read the " + what + " into a shape, which a trace freezes",
                        hint);
    }
    if (got.sizes() != expected.sizes()) {
      throw usage_error("the traced forward gives shape " + c10::str(got.sizes()) + " at " + where +
                            " where the model gives " + c10::str(expected.sizes()) + ": the trace froze a size of " +
                            "the trace's input",
                        hint);
    }
    worst = std::max(worst, (got - expected).abs().max().item<double>());
  }
  return worst;
}

}  // namespace mixt
