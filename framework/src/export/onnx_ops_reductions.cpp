// Reductions and selection (export/onnx_op_families.h). Reductions over the batch are
// refused: the file's batch stays symbolic, and a sum across samples is not a per-sample model.
#include "export/onnx_op_families.h"

namespace mixt {

namespace {

using namespace onnx_ops;

// Axes of a dim-list argument, non-negative, the batch refused.
std::vector<std::int64_t> axes_without_batch(AtenNode& n, std::size_t i, const char* what) {
  std::vector<std::int64_t> axes = is_list(n, i) ? n.ints(i) : std::vector<std::int64_t>{n.int_(i)};
  if (axes.empty()) n.refuse(std::string(what) + " over every dimension (the batch among them)");
  for (auto& a : axes) {
    a = n.axis(0, a);
    if (a == 0) n.refuse(std::string(what) + " over the batch dimension");
  }
  return axes;
}

// A Reduce* node: axes as an input from `input_from` (ReduceSum 13, the others 18), an
// attribute before.
void reduce(AtenNode& n, OnnxBuilder& b, const char* type, std::int64_t input_from, const char* what) {
  if (n.inputs() < 3) n.refuse(std::string(what) + " over every dimension (the batch among them)");
  const std::vector<std::int64_t> axes = axes_without_batch(n, 1, what);
  torch::jit::Node* r =
      b.opset() >= input_from ? b.node(type, {n.tensor(0), b.ints(axes)}) : b.node(type, {n.tensor(0)});
  if (b.opset() < input_from) r->is_(attr("axes"), axes);
  r->i_(attr("keepdims"), n.bool_(2) ? 1 : 0);
  n.set_output(r->output());
}

// aten::sum(self, dim, keepdim, dtype)
void sum(AtenNode& n, OnnxBuilder& b) {
  if (n.inputs() > 3 && !n.is_none(3)) n.refuse("sum with a dtype");
  reduce(n, b, "ReduceSum", 13, "a sum");
}
void amax(AtenNode& n, OnnxBuilder& b) { reduce(n, b, "ReduceMax", 18, "a maximum"); }
void amin(AtenNode& n, OnnxBuilder& b) { reduce(n, b, "ReduceMin", 18, "a minimum"); }

// aten::linalg_vector_norm(self, ord, dim, keepdim, dtype): ReduceL2 or ReduceL1 (axes an
// input from opset 18).
void vector_norm(AtenNode& n, OnnxBuilder& b) {
  if (n.inputs() > 4 && !n.is_none(4)) n.refuse("a norm with a dtype");
  if (n.is_none(2)) n.refuse("a norm over every dimension (the batch among them)");
  const double ord = n.double_(1);
  if (ord != 2.0 && ord != 1.0) n.refuse("a norm of order other than 1 or 2");
  const std::vector<std::int64_t> axes = axes_without_batch(n, 2, "a norm");
  const char* type = ord == 2.0 ? "ReduceL2" : "ReduceL1";
  torch::jit::Node* r = b.opset() >= 18 ? b.node(type, {n.tensor(0), b.ints(axes)}) : b.node(type, {n.tensor(0)});
  if (b.opset() < 18) r->is_(attr("axes"), axes);
  r->i_(attr("keepdims"), n.bool_(3) ? 1 : 0);
  n.set_output(r->output());
}

// aten::where(condition, self, other): numbers take the type of the tensor beside them.
void where(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType t = n.is_tensor(1) ? n.scalar_type(1) : n.is_tensor(2) ? n.scalar_type(2) : at::kFloat;
  n.set_output(b.op("Where", {n.tensor(0), n.tensor(1, t), n.tensor(2, t)}));
}

// aten::stack(tensors, dim): each unsqueezed at dim (a negative dim counts from the end of
// the output, as in ONNX), then Concat.
void stack(AtenNode& n, OnnxBuilder& b) {
  const std::int64_t dim = n.int_(1);
  if (dim == 0) n.refuse("stacking along the batch dimension");
  std::vector<Value*> parts;
  for (Value* t : n.tensors(0)) parts.push_back(b.op("Unsqueeze", {t, b.ints({dim})}));
  torch::jit::Node* c = b.node("Concat", parts);
  c->i_(attr("axis"), dim);
  n.set_output(c->output());
}

// aten::squeeze(self, dim) or (self, dims): the named axes only. Without one, which axes
// go would depend on the batch (a batch of 1 would lose its axis): refused.
void squeeze(AtenNode& n, OnnxBuilder& b) {
  if (n.inputs() < 2) n.refuse("squeezing every axis of size 1 (name the axes: the batch may be 1)");
  const std::vector<std::int64_t> sizes = n.traced_sizes(0);
  std::vector<std::int64_t> axes;
  for (std::int64_t a : axes_without_batch(n, 1, "a squeeze")) {
    if (sizes.at(static_cast<std::size_t>(a)) == 1) axes.push_back(a);  // ATen leaves other sizes alone
  }
  n.set_output(axes.empty() ? n.tensor(0) : b.op("Squeeze", {n.tensor(0), b.ints(axes)}));
}

}  // namespace

std::vector<OnnxTranslation> reduction_translations() {
  return {
      {"aten::amax", "ReduceMax", amax},
      {"aten::amin", "ReduceMin", amin},
      {"aten::linalg_vector_norm", "ReduceL2 or ReduceL1", vector_norm},
      {"aten::squeeze", "Squeeze", squeeze},
      {"aten::stack", "Unsqueeze+Concat", stack},
      {"aten::sum", "ReduceSum", sum},
      {"aten::where", "Where", where},
  };
}

}  // namespace mixt
