#include "export/onnx_float16.h"

namespace mixt {

namespace {

at::Tensor half(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t.to(at::kHalf) : t; }

void retype(torch::jit::Value* value) {
  if (auto type = value->type()->cast<c10::TensorType>(); type && type->scalarType() == at::kFloat) {
    value->setType(type->withScalarType(at::kHalf));
  }
}

}  // namespace

void convert_to_float16(OnnxGraph& graph) {
  for (auto& [name, tensor] : graph.initializers) tensor = half(tensor);
  for (torch::jit::Value* input : graph.graph->inputs()) retype(input);
  for (torch::jit::Value* output : graph.graph->outputs()) retype(output);
  for (torch::jit::Node* node : graph.graph->nodes()) {
    if (node->kind() == c10::onnx::Constant && node->hasAttribute(c10::attr::value)) {
      node->t_(c10::attr::value, half(node->t(c10::attr::value)));
    }
  }
}

}  // namespace mixt
