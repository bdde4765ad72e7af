// Creation, shape arithmetic and indexing: arange, zeros/ones/full and their new_* forms,
// fill_/zero_, expand, repeat, flip, diff, index_select, index (one index tensor),
// floor_divide, remainder; the sizes a forward reads (size, Int); and the batched matrix
// products bmm, baddbmm, einsum.
#include <limits>

#include "export/onnx_op_families.h"

namespace mixt {

namespace {
using namespace onnx_ops;

bool is_floating(at::ScalarType type) { return at::isFloatingType(type); }

// A 0-D or 1-element constant of `type`, for ConstantOfShape's `value`.
at::Tensor one_value(double value, at::ScalarType type) { return at::full({1}, value, at::TensorOptions(type)); }

// Argument i in `type`: a number as a constant of it, a tensor of another type cast (ATen's
// type promotion: an int32 divisor of int64 values).
Value* tensor_as(AtenNode& n, OnnxBuilder& b, std::size_t i, at::ScalarType type) {
  Value* v = n.tensor(i, type);
  if (!n.is_tensor(i) || n.scalar_type(i) == type) return v;
  torch::jit::Node* c = b.node("Cast", {v});
  c->i_(attr("to"), onnx_element_type(n, type));
  return c->output();
}

// ConstantOfShape of the node's output type: the sizes as the trace recorded them.
void constant_of_shape(AtenNode& n, OnnxBuilder& b, const std::vector<std::int64_t>& size, double value) {
  torch::jit::Node* c = b.node("ConstantOfShape", {b.ints(size)});
  c->t_(attr("value"), one_value(value, n.output_scalar_type()));
  n.set_output(c->output());
}

// aten::arange(end, ...), arange(start, end, ...), arange(start, end, step, ...): Range in
// the output's type (the trailing four arguments are dtype, layout, device, pin_memory).
void arange(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType type = n.output_scalar_type();
  const std::size_t numbers = n.inputs() - 4;
  const auto cast = [&](Value* v) {
    torch::jit::Node* c = b.node("Cast", {v});
    c->i_(attr("to"), onnx_element_type(n, type));
    return c->output();
  };
  Value* start = numbers >= 2 ? cast(n.tensor(0, type)) : b.scalar(0, type);
  Value* end = cast(n.tensor(numbers >= 2 ? 1 : 0, type));
  Value* step = numbers >= 3 ? cast(n.tensor(2, type)) : b.scalar(1, type);
  n.set_output(b.op("Range", {start, end, step}));
}

// aten::zeros/ones(size, dtype, ...), full(size, fill_value, dtype, ...).
void zeros(AtenNode& n, OnnxBuilder& b) { constant_of_shape(n, b, n.ints(0), 0.0); }
void ones(AtenNode& n, OnnxBuilder& b) { constant_of_shape(n, b, n.ints(0), 1.0); }
void full(AtenNode& n, OnnxBuilder& b) { constant_of_shape(n, b, n.ints(0), n.double_(1)); }
// aten::new_zeros/new_ones(self, size, ...), new_full(self, size, fill_value, ...).
void new_zeros(AtenNode& n, OnnxBuilder& b) { constant_of_shape(n, b, n.ints(1), 0.0); }
void new_ones(AtenNode& n, OnnxBuilder& b) { constant_of_shape(n, b, n.ints(1), 1.0); }
void new_full(AtenNode& n, OnnxBuilder& b) { constant_of_shape(n, b, n.ints(1), n.double_(2)); }

// aten::fill_(self, value), zero_(self): the value broadcast to self's shape (batch included).
void fill_with(AtenNode& n, OnnxBuilder& b, Value* value) {
  n.set_output(b.op("Expand", {value, b.op("Shape", {n.tensor(0)})}));
}
void fill_(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType type = n.scalar_type(0);
  Value* value = n.is_tensor(1) ? n.tensor(1) : b.scalar(n.double_(1), type);
  if (n.is_tensor(1) && n.scalar_type(1) != type) {
    torch::jit::Node* c = b.node("Cast", {value});
    c->i_(attr("to"), onnx_element_type(n, type));
    value = c->output();
  }
  fill_with(n, b, value);
}
void zero_(AtenNode& n, OnnxBuilder& b) { fill_with(n, b, b.scalar(0, n.scalar_type(0))); }

// aten::expand(self, size, implicit): Expand broadcasts both ways, so a dimension kept (-1,
// or the size self already has) becomes 1 there and the batch stays symbolic.
void expand(AtenNode& n, OnnxBuilder& b) {
  const std::vector<std::int64_t> size = n.ints(1);
  const std::vector<std::int64_t> have = n.traced_sizes(0);
  const std::int64_t lead = static_cast<std::int64_t>(size.size()) - static_cast<std::int64_t>(have.size());
  if (lead < 0) n.refuse("expand to fewer dimensions than its input has");
  std::vector<std::int64_t> target = size;
  for (std::size_t i = 0; i < size.size(); ++i) {
    const std::int64_t j = static_cast<std::int64_t>(i) - lead;
    if (size[i] == -1 || (j >= 0 && have[static_cast<std::size_t>(j)] == size[i])) target[i] = 1;
  }
  n.set_output(b.op("Expand", {n.tensor(0), b.ints(target)}));
}

// aten::repeat(self, repeats): Tile, after leading axes of 1 for repeats beyond self's rank.
void repeat(AtenNode& n, OnnxBuilder& b) {
  const std::vector<std::int64_t> repeats = n.ints(1);
  const std::int64_t lead = static_cast<std::int64_t>(repeats.size()) - n.rank(0);
  if (lead < 0) n.refuse("fewer repeats than dimensions");
  Value* x = n.tensor(0);
  if (lead > 0) {
    std::vector<std::int64_t> axes;
    for (std::int64_t a = 0; a < lead; ++a) axes.push_back(a);
    x = b.op("Unsqueeze", {x, b.ints(axes)});
  }
  n.set_output(b.op("Tile", {x, b.ints(repeats)}));
}

// aten::flip(self, dims): a Slice of step -1 along each.
void flip(AtenNode& n, OnnxBuilder& b) {
  std::vector<std::int64_t> axes;
  for (const std::int64_t dim : n.ints(1)) axes.push_back(n.axis(0, dim));
  const std::size_t k = axes.size();
  n.set_output(b.op("Slice", {n.tensor(0), b.ints(std::vector<std::int64_t>(k, -1)),
                              b.ints(std::vector<std::int64_t>(k, std::numeric_limits<std::int64_t>::min())),
                              b.ints(axes), b.ints(std::vector<std::int64_t>(k, -1))}));
}

// aten::index_select(self, dim, index): Gather.
void index_select(AtenNode& n, OnnxBuilder& b) {
  torch::jit::Node* g = b.node("Gather", {n.tensor(0), n.tensor(2)});
  g->i_(attr("axis"), n.axis(0, n.int_(1)));
  n.set_output(g->output());
}

// aten::index(self, indices): x[..., idx] with one integer index tensor (None before it) is
// a Gather along that axis; a boolean mask's output size depends on the data.
void index(AtenNode& n, OnnxBuilder& b) {
  const std::vector<Value*> indices = n.optional_tensors(1);
  std::size_t axis = indices.size();
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    if (axis != indices.size()) n.refuse("more than one index tensor");
    axis = i;
  }
  if (axis == indices.size()) n.refuse("no index tensor");
  const torch::jit::Value* traced_index = n.traced().inputs().at(1)->node()->inputs().at(axis);
  const c10::TensorTypePtr type = traced_index->type()->cast<c10::TensorType>();
  if (type && type->scalarType() && (*type->scalarType() == at::kBool || *type->scalarType() == at::kByte)) {
    n.refuse("a boolean mask (its output size depends on the data)");
  }
  torch::jit::Node* g = b.node("Gather", {n.tensor(0), indices[axis]});
  g->i_(attr("axis"), static_cast<std::int64_t>(axis));
  n.set_output(g->output());
}

// aten::floor_divide(self, other): Floor(Div) for floats; for integers (a - Mod(a, b)) / b,
// Mod with fmod=0 taking the divisor's sign as Python's floor division does.
void floor_divide(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType type = n.output_scalar_type();
  Value* a = tensor_as(n, b, 0, type);
  Value* d = tensor_as(n, b, 1, type);
  if (is_floating(type)) return n.set_output(b.op("Floor", {b.op("Div", {a, d})}));
  torch::jit::Node* mod = b.node("Mod", {a, d});
  mod->i_(attr("fmod"), 0);
  n.set_output(b.op("Div", {b.op("Sub", {a, mod->output()}), d}));
}

// aten::remainder(self, other): Python's modulo (the divisor's sign): Mod for integers,
// a - Floor(a / b) * b for floats (ONNX's Mod takes floats only as C's fmod).
void remainder(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType type = n.output_scalar_type();
  Value* a = tensor_as(n, b, 0, type);
  Value* d = tensor_as(n, b, 1, type);
  if (is_floating(type)) {
    return n.set_output(b.op("Sub", {a, b.op("Mul", {b.op("Floor", {b.op("Div", {a, d})}), d})}));
  }
  torch::jit::Node* mod = b.node("Mod", {a, d});
  mod->i_(attr("fmod"), 0);
  n.set_output(mod->output());
}

// aten::diff(self, n, dim, prepend, append): x[1:] - x[:-1] along dim, n times, after
// prepend and append are concatenated there.
void diff(AtenNode& n, OnnxBuilder& b) {
  const std::int64_t axis = n.axis(0, n.int_(2));
  std::vector<Value*> parts;
  if (!n.is_none(3)) parts.push_back(n.tensor(3));
  parts.push_back(n.tensor(0));
  if (!n.is_none(4)) parts.push_back(n.tensor(4));
  Value* x = parts.front();
  if (parts.size() > 1) {
    torch::jit::Node* c = b.node("Concat", parts);
    c->i_(attr("axis"), axis);
    x = c->output();
  }
  const std::int64_t end = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t k = 0; k < n.int_(1); ++k) {
    Value* later = b.op("Slice", {x, b.ints({1}), b.ints({end}), b.ints({axis})});
    Value* earlier = b.op("Slice", {x, b.ints({0}), b.ints({-1}), b.ints({axis})});
    x = b.op("Sub", {later, earlier});
  }
  n.set_output(x);
}

// aten::bmm(self, mat2): MatMul.
void bmm(AtenNode& n, OnnxBuilder& b) { n.set_output(b.op("MatMul", {n.tensor(0), n.tensor(1)})); }

// aten::baddbmm(self, batch1, batch2, beta, alpha): beta * self + alpha * batch1 @ batch2.
void baddbmm(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType type = n.scalar_type(0);
  Value* product = b.op("MatMul", {n.tensor(1), n.tensor(2)});
  const double beta = n.double_(3), alpha = n.double_(4);
  if (alpha != 1.0) product = b.op("Mul", {product, b.scalar(alpha, type)});
  if (beta == 0.0) return n.set_output(product);  // as ATen: self is ignored, even its NaNs
  Value* self = n.tensor(0);
  if (beta != 1.0) self = b.op("Mul", {self, b.scalar(beta, type)});
  n.set_output(b.op("Add", {self, product}));
}

// aten::einsum(equation, tensors, path): Einsum.
void einsum(AtenNode& n, OnnxBuilder& b) {
  torch::jit::Node* e = b.node("Einsum", n.tensors(1));
  e->s_(attr("equation"), n.string(0));
  n.set_output(e->output());
}

// aten::size(self, dim) -> int: a 0-D int64 read from the input's shape, so that what the
// forward computes from it follows the input (mixt::upsample_bilinear_like records it).
void size(AtenNode& n, OnnxBuilder& b) {
  if (n.inputs() != 2) n.refuse("the whole shape as a list (only size(dim) is translated)");
  torch::jit::Node* gather = b.node("Gather", {b.op("Shape", {n.tensor(0)}), b.scalar(n.int_(1), at::kLong)});
  gather->i_(attr("axis"), 0);
  n.set_output(gather->output());
}

// aten::Int(tensor) -> int: a size read back as a number (prim::NumToTensor's inverse), an
// int64 0-D tensor in ONNX.
void int_of(AtenNode& n, OnnxBuilder& b) {
  const bool traced_size = n.traced().input(0)->node()->kind() == c10::prim::NumToTensor;
  n.set_output(traced_size ? n.tensor(0) : tensor_as(n, b, 0, at::kLong));
}

}  // namespace

std::vector<OnnxTranslation> shape_translations() {
  return {
      {"aten::arange", "Cast+Range", arange},
      {"aten::baddbmm", "MatMul (Mul by alpha, beta; Add)", baddbmm},
      {"aten::bmm", "MatMul", bmm},
      {"aten::diff", "Slice+Sub (Concat for prepend, append)", diff},
      {"aten::einsum", "Einsum", einsum},
      {"aten::expand", "Expand", expand},
      {"aten::fill_", "Shape+Expand", fill_},
      {"aten::flip", "Slice (step -1)", flip},
      {"aten::floor_divide", "Div+Floor (floats), Mod+Sub+Div (integers)", floor_divide},
      {"aten::full", "ConstantOfShape", full},
      {"aten::index", "Gather (one index tensor)", index},
      {"aten::index_select", "Gather", index_select},
      {"aten::new_full", "ConstantOfShape", new_full},
      {"aten::new_ones", "ConstantOfShape", new_ones},
      {"aten::new_zeros", "ConstantOfShape", new_zeros},
      {"aten::ones", "ConstantOfShape", ones},
      {"aten::remainder", "Mod (integers), Div+Floor+Mul+Sub (floats)", remainder},
      {"aten::repeat", "Tile (Unsqueeze first for new axes)", repeat},
      {"aten::zero_", "Shape+Expand", zero_},
      {"aten::size", "Shape+Gather", size},
      {"aten::zeros", "ConstantOfShape", zeros},
      {"aten::Int", "(nothing) for a traced size, else Cast to int64", int_of},
  };
}

}  // namespace mixt
