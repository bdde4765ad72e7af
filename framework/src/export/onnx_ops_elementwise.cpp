// Elementwise math and activations (export/onnx_op_families.h). Each keeps its input's
// shape, so the batch stays symbolic by construction; a number operand takes the tensor's type.
#include "export/onnx_op_families.h"

namespace mixt {

namespace {

using namespace onnx_ops;

template <const char* Type>
void unary_op(AtenNode& n, OnnxBuilder& b) {
  unary(n, b, Type);
}

// aten::div(self, other, rounding_mode?): true division only.
void div(AtenNode& n, OnnxBuilder& b) {
  if (n.inputs() > 2 && !n.is_none(2)) n.refuse("division with rounding_mode " + n.string(2));
  const at::ScalarType t = n.scalar_type(0);
  n.set_output(b.op("Div", {n.tensor(0, t), n.tensor(1, t)}));
}

// aten::rsub(self, other, alpha): other - alpha * self.
void rsub(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType t = n.scalar_type(0);
  Value* scaled = n.tensor(0, t);
  if (n.inputs() > 2 && n.double_(2) != 1.0) scaled = b.op("Mul", {scaled, b.scalar(n.double_(2), t)});
  n.set_output(b.op("Sub", {n.tensor(1, t), scaled}));
}

// aten::maximum(self, other), aten::minimum: Max, Min (both tensors, broadcast).
void maximum(AtenNode& n, OnnxBuilder& b) {
  n.set_output(b.op("Max", {n.tensor(0, n.scalar_type(0)), n.tensor(1, n.scalar_type(0))}));
}
void minimum(AtenNode& n, OnnxBuilder& b) {
  n.set_output(b.op("Min", {n.tensor(0, n.scalar_type(0)), n.tensor(1, n.scalar_type(0))}));
}

// aten::gt(self, other) and the other comparisons: a bool tensor; a number takes self's type.
template <const char* Type, bool Negate = false>
void compare(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType t = n.scalar_type(0);
  Value* out = b.op(Type, {n.tensor(0, t), n.tensor(1, t)});
  n.set_output(Negate ? b.op("Not", {out}) : out);
}

// aten::clamp(self, min?, max?) with numbers: Clip (an absent bound: none).
void clamp(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType t = n.scalar_type(0);
  if ((!n.is_none(1) && n.is_tensor(1)) || (!n.is_none(2) && n.is_tensor(2))) n.refuse("tensor bounds");
  Value* low = n.is_none(1) ? b.none() : b.scalar(n.double_(1), t);
  Value* high = n.is_none(2) ? b.none() : b.scalar(n.double_(2), t);
  n.set_output(b.op("Clip", {n.tensor(0, t), low, high}));
}

// aten::clamp_min(self, min): Max with the bound.
void clamp_min(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType t = n.scalar_type(0);
  n.set_output(b.op("Max", {n.tensor(0, t), n.tensor(1, t)}));
}

// aten::leaky_relu(self, negative_slope)
void leaky_relu(AtenNode& n, OnnxBuilder& b) {
  torch::jit::Node* l = b.node("LeakyRelu", {n.tensor(0)});
  l->f_(attr("alpha"), n.inputs() > 1 ? n.double_(1) : 0.01);
  n.set_output(l->output());
}

// aten::elu(self, alpha, scale, input_scale): ONNX Elu is scale = input_scale = 1.
void elu(AtenNode& n, OnnxBuilder& b) {
  if (n.double_(2) != 1.0 || n.double_(3) != 1.0) n.refuse("elu with scale or input_scale other than 1 (selu)");
  torch::jit::Node* e = b.node("Elu", {n.tensor(0)});
  e->f_(attr("alpha"), n.double_(1));
  n.set_output(e->output());
}

// aten::softplus(self, beta, threshold): log(1 + exp(beta x)) / beta, x itself where
// beta x > threshold (ATen's switch to the identity, kept so large inputs do not overflow).
void softplus(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType t = n.scalar_type(0);
  const double beta = n.double_(1), threshold = n.double_(2);
  Value* x = n.tensor(0);
  Value* scaled = beta == 1.0 ? x : b.op("Mul", {x, b.scalar(beta, t)});
  Value* soft = b.op("Softplus", {scaled});
  if (beta != 1.0) soft = b.op("Div", {soft, b.scalar(beta, t)});
  n.set_output(b.op("Where", {b.op("Greater", {scaled, b.scalar(threshold, t)}), x, soft}));
}

// aten::log_softmax(self, dim, dtype)
void log_softmax(AtenNode& n, OnnxBuilder& b) {
  if (!n.is_none(2)) n.refuse("log_softmax with a dtype");
  torch::jit::Node* s = b.node("LogSoftmax", {n.tensor(0)});
  s->i_(attr("axis"), n.int_(1));
  n.set_output(s->output());
}

constexpr char kGreater[] = "Greater", kLess[] = "Less", kGreaterOrEqual[] = "GreaterOrEqual",
               kLessOrEqual[] = "LessOrEqual", kEqual[] = "Equal";
constexpr char kTanh[] = "Tanh", kExp[] = "Exp", kLog[] = "Log", kSqrt[] = "Sqrt", kAbs[] = "Abs", kErf[] = "Erf",
               kReciprocal[] = "Reciprocal";

}  // namespace

std::vector<OnnxTranslation> elementwise_translations() {
  return {
      {"aten::abs", "Abs", unary_op<kAbs>},
      {"aten::clamp", "Clip", clamp},
      {"aten::clamp_min", "Max", clamp_min},
      {"aten::div", "Div", div},
      {"aten::elu", "Elu", elu},
      {"aten::eq", "Equal", compare<kEqual>},
      {"aten::erf", "Erf", unary_op<kErf>},
      {"aten::exp", "Exp", unary_op<kExp>},
      {"aten::ge", "GreaterOrEqual", compare<kGreaterOrEqual>},
      {"aten::gt", "Greater", compare<kGreater>},
      {"aten::le", "LessOrEqual", compare<kLessOrEqual>},
      {"aten::leaky_relu", "LeakyRelu", leaky_relu},
      {"aten::leaky_relu_", "LeakyRelu", leaky_relu},
      {"aten::log", "Log", unary_op<kLog>},
      {"aten::log_softmax", "LogSoftmax", log_softmax},
      {"aten::lt", "Less", compare<kLess>},
      {"aten::maximum", "Max", maximum},
      {"aten::minimum", "Min", minimum},
      {"aten::ne", "Equal+Not", compare<kEqual, true>},
      {"aten::reciprocal", "Reciprocal", unary_op<kReciprocal>},
      {"aten::rsub", "Sub (Mul by alpha when alpha ≠ 1)", rsub},
      {"aten::softplus", "Mul+Softplus+Div+Greater+Where", softplus},
      {"aten::sqrt", "Sqrt", unary_op<kSqrt>},
      {"aten::tanh", "Tanh", unary_op<kTanh>},
      {"aten::tanh_", "Tanh", unary_op<kTanh>},
  };
}

}  // namespace mixt
