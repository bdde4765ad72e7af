#include "export/onnx_op_table.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "export/onnx_op_families.h"

namespace mixt {

namespace {

using namespace onnx_ops;

using Builder = OnnxBuilder;
void identity(AtenNode& n, Builder&) { n.set_output(n.tensor(0)); }

void binary(AtenNode& n, Builder& b, const char* type) {
  const at::ScalarType t = n.is_tensor(0) ? n.scalar_type(0) : at::kFloat;
  n.set_output(b.op(type, {n.tensor(0, t), n.tensor(1, t)}));
}

// Conv on input, weight, optional bias.
void conv(AtenNode& n, Builder& b, const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& padding,
          const std::vector<std::int64_t>& dilation, std::int64_t groups) {
  const std::vector<std::int64_t> weight = n.traced_sizes(1);
  const std::size_t dims = weight.size() - 2;
  std::vector<Value*> inputs{n.tensor(0), n.tensor(1)};
  if (!n.is_none(2)) inputs.push_back(n.tensor(2));
  torch::jit::Node* c = b.node("Conv", inputs);
  c->is_(attr("kernel_shape"), {weight.begin() + 2, weight.end()});
  c->is_(attr("strides"), per_dimension(stride, dims));
  c->is_(attr("pads"), twice(per_dimension(padding, dims)));
  c->is_(attr("dilations"), per_dimension(dilation, dims));
  c->i_(attr("group"), groups);
  n.set_output(c->output());
}

// ConvTranspose on input, weight ([in, out / groups, kernel...], as ONNX's), optional bias:
// ATen's padding p and output_padding are ONNX's pads (p at both ends) and output_padding.
void conv_transpose(AtenNode& n, Builder& b, const std::vector<std::int64_t>& stride,
                    const std::vector<std::int64_t>& padding, const std::vector<std::int64_t>& dilation,
                    const std::vector<std::int64_t>& output_padding, std::int64_t groups) {
  const std::vector<std::int64_t> weight = n.traced_sizes(1);
  const std::size_t dims = weight.size() - 2;
  std::vector<Value*> inputs{n.tensor(0), n.tensor(1)};
  if (!n.is_none(2)) inputs.push_back(n.tensor(2));
  torch::jit::Node* c = b.node("ConvTranspose", inputs);
  c->is_(attr("kernel_shape"), {weight.begin() + 2, weight.end()});
  c->is_(attr("strides"), per_dimension(stride, dims));
  c->is_(attr("pads"), twice(per_dimension(padding, dims)));
  c->is_(attr("dilations"), per_dimension(dilation, dims));
  c->is_(attr("output_padding"), per_dimension(output_padding, dims));
  c->i_(attr("group"), groups);
  n.set_output(c->output());
}

// aten::_convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
//                    groups, benchmark, deterministic, cudnn_enabled, allow_tf32)
void convolution(AtenNode& n, Builder& b) {
  if (n.bool_(6)) {
    conv_transpose(n, b, n.ints(3), n.ints(4), n.ints(5), n.ints(7), n.int_(8));
  } else {
    conv(n, b, n.ints(3), n.ints(4), n.ints(5), n.int_(8));
  }
}

// aten::batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn)
void batch_norm(AtenNode& n, Builder& b) {
  if (n.bool_(5)) n.refuse("batch norm in training mode (export traces in eval mode)");
  if (n.is_none(3) || n.is_none(4)) n.refuse("batch norm without running statistics");
  const std::int64_t channels = n.traced_sizes(3).at(0);
  Value* scale = n.is_none(1) ? b.constant(at::ones({channels})) : n.tensor(1);
  Value* bias = n.is_none(2) ? b.constant(at::zeros({channels})) : n.tensor(2);
  torch::jit::Node* bn = b.node("BatchNormalization", {n.tensor(0), scale, bias, n.tensor(3), n.tensor(4)});
  bn->f_(attr("epsilon"), n.double_(7));
  n.set_output(bn->output());
}

// aten::add(self, other, alpha), aten::sub: self +- alpha * other (`type` Add or Sub)
void add_scaled(AtenNode& n, Builder& b, const char* type) {
  const at::ScalarType t = n.scalar_type(0);
  Value* other = n.tensor(1, t);
  if (n.inputs() > 2 && n.double_(2) != 1.0) other = b.op("Mul", {other, b.scalar(n.double_(2), t)});
  n.set_output(b.op(type, {n.tensor(0, t), other}));
}
void add(AtenNode& n, Builder& b) { add_scaled(n, b, "Add"); }

// aten::max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode)
void max_pool2d(AtenNode& n, Builder& b) {
  const std::vector<std::int64_t> kernel = per_dimension(n.ints(1), 2);
  std::vector<std::int64_t> stride = n.ints(2);
  if (stride.empty()) stride = kernel;
  torch::jit::Node* p = b.node("MaxPool", {n.tensor(0)});
  p->is_(attr("kernel_shape"), kernel);
  p->is_(attr("strides"), per_dimension(stride, 2));
  p->is_(attr("pads"), twice(per_dimension(n.ints(3), 2)));
  p->is_(attr("dilations"), per_dimension(n.ints(4), 2));
  p->i_(attr("ceil_mode"), n.bool_(5) ? 1 : 0);
  n.set_output(p->output());
}

// Adaptive average pooling along one axis: out cells, each the mean of ATen's window
// [floor(i * in / out), ceil((i + 1) * in / out)).
Value* adaptive_mean(Builder& b, Value* x, std::int64_t axis, std::int64_t in, std::int64_t out) {
  if (in == out) return x;
  std::vector<Value*> cells;
  for (std::int64_t i = 0; i < out; ++i) {
    const std::int64_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
    Value* slice = b.op("Slice", {x, b.ints({start}), b.ints({end}), b.ints({axis})});
    torch::jit::Node* mean =
        b.opset() >= 18 ? b.node("ReduceMean", {slice, b.ints({axis})}) : b.node("ReduceMean", {slice});
    if (b.opset() < 18) mean->is_(attr("axes"), {axis});
    mean->i_(attr("keepdims"), 1);
    cells.push_back(mean->output());
  }
  if (cells.size() == 1) return cells[0];
  torch::jit::Node* cat = b.node("Concat", cells);
  cat->i_(attr("axis"), axis);
  return cat->output();
}

// aten::adaptive_avg_pool2d(self, output_size)
void adaptive_avg_pool2d(AtenNode& n, Builder& b) {
  const std::vector<std::int64_t> in = n.traced_sizes(0);
  const std::vector<std::int64_t> out = per_dimension(n.ints(1), 2);
  const std::int64_t h = in.at(in.size() - 2), w = in.at(in.size() - 1);
  if (out[0] == 1 && out[1] == 1) return n.set_output(b.op("GlobalAveragePool", {n.tensor(0)}));
  if (h % out[0] == 0 && w % out[1] == 0) {
    torch::jit::Node* p = b.node("AveragePool", {n.tensor(0)});
    p->is_(attr("kernel_shape"), {h / out[0], w / out[1]});
    p->is_(attr("strides"), {h / out[0], w / out[1]});
    return n.set_output(p->output());
  }
  const std::int64_t rank = n.rank(0);
  n.set_output(adaptive_mean(b, adaptive_mean(b, n.tensor(0), rank - 2, h, out[0]), rank - 1, w, out[1]));
}

// A Reshape whose shape keeps dimensions [0, keep) as they are (0: copied, so the batch
// stays symbolic), then `middle`, then the traced sizes of dimensions [tail, rank).
void reshape_around(AtenNode& n, Builder& b, std::int64_t keep, const std::vector<std::int64_t>& middle,
                    std::int64_t tail) {
  const std::vector<std::int64_t> sizes = n.traced_sizes(0);
  std::vector<std::int64_t> shape(static_cast<std::size_t>(keep), 0);
  shape.insert(shape.end(), middle.begin(), middle.end());
  shape.insert(shape.end(), sizes.begin() + tail, sizes.end());
  n.set_output(b.op("Reshape", {n.tensor(0), b.ints(shape)}));
}

// aten::flatten(self, start_dim, end_dim)
void flatten(AtenNode& n, Builder& b) {
  const std::int64_t rank = n.rank(0);
  if (rank == 0) return n.set_output(b.op("Reshape", {n.tensor(0), b.ints({1})}));
  const std::int64_t start = n.axis(0, n.int_(1)), end = n.axis(0, n.int_(2));
  if (start == end) return n.set_output(n.tensor(0));
  if (start == 1 && end == rank - 1) {
    torch::jit::Node* f = b.node("Flatten", {n.tensor(0)});
    f->i_(attr("axis"), 1);
    return n.set_output(f->output());
  }
  reshape_around(n, b, start, {-1}, end + 1);
}

// aten::unflatten(self, dim, sizes)
void unflatten(AtenNode& n, Builder& b) {
  const std::int64_t dim = n.axis(0, n.int_(1));
  if (dim == 0) n.refuse("unflattening the batch dimension");
  reshape_around(n, b, dim, n.ints(2), dim + 1);
}

// aten::reshape(self, shape), aten::view(self, size): the shape as traced. A forward that
// wrote the trace's batch into it is refused by the export's run at other batches.
void reshape(AtenNode& n, Builder& b) { n.set_output(b.op("Reshape", {n.tensor(0), b.ints(n.ints(1))})); }

// aten::linear(input, weight, bias): input @ weight.T + bias
void linear(AtenNode& n, Builder& b) {
  if (n.rank(0) == 2) {
    std::vector<Value*> inputs{n.tensor(0), n.tensor(1)};
    if (!n.is_none(2)) inputs.push_back(n.tensor(2));
    torch::jit::Node* g = b.node("Gemm", inputs);
    g->i_(attr("transB"), 1);
    return n.set_output(g->output());
  }
  torch::jit::Node* t = b.node("Transpose", {n.tensor(1)});
  t->is_(attr("perm"), {1, 0});
  Value* y = b.op("MatMul", {n.tensor(0), t->output()});
  n.set_output(n.is_none(2) ? y : b.op("Add", {y, n.tensor(2)}));
}

// aten::dropout(input, p, train) and its kin: the identity in evaluation.
void dropout(AtenNode& n, Builder&) {
  if (n.bool_(2)) n.refuse("dropout in training mode (export traces in eval mode)");
  n.set_output(n.tensor(0));
}

// aten::upsample_bilinear2d(self, output_size, align_corners, scales_h, scales_w): Resize
// (linear) to the traced output size, the batch and channels taken from the input's shape
// so the batch stays symbolic. PyTorch's align_corners=False is ONNX's pytorch_half_pixel.
void upsample_bilinear2d(AtenNode& n, Builder& b) {
  torch::jit::Node* resize = resize_to_traced_size(n, b);
  resize->s_(attr("mode"), "linear");
  resize->s_(attr("coordinate_transformation_mode"), n.bool_(2) ? "align_corners" : "pytorch_half_pixel");
  n.set_output(resize->output());
}

void hardsigmoid(AtenNode& n, Builder& b) {
  torch::jit::Node* h = b.node("HardSigmoid", {n.tensor(0)});
  h->f_(attr("alpha"), 1.0 / 6.0);
  h->f_(attr("beta"), 0.5);
  n.set_output(h->output());
}

void silu(AtenNode& n, Builder& b) {
  Value* x = n.tensor(0);
  n.set_output(b.op("Mul", {x, b.op("Sigmoid", {x})}));
}

// aten::hardtanh(self, min_val, max_val): Clip (ReLU6 is hardtanh(0, 6)).
void hardtanh(AtenNode& n, Builder& b) {
  const at::ScalarType t = n.scalar_type(0);
  n.set_output(b.op("Clip", {n.tensor(0), b.scalar(n.double_(1), t), b.scalar(n.double_(2), t)}));
}

// aten::layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
void layer_norm(AtenNode& n, Builder& b) {
  const std::vector<std::int64_t> shape = n.ints(1);
  Value* scale = n.is_none(2) ? b.constant(at::ones(shape)) : n.tensor(2);
  std::vector<Value*> inputs{n.tensor(0), scale};
  if (!n.is_none(3)) inputs.push_back(n.tensor(3));
  torch::jit::Node* l = b.node("LayerNormalization", inputs);
  l->i_(attr("axis"), -static_cast<std::int64_t>(shape.size()));
  l->f_(attr("epsilon"), n.double_(4));
  n.set_output(l->output());
}

void permute(AtenNode& n, Builder& b) {
  std::vector<std::int64_t> perm = n.ints(1);
  for (auto& d : perm) d = n.axis(0, d);
  torch::jit::Node* t = b.node("Transpose", {n.tensor(0)});
  t->is_(attr("perm"), perm);
  n.set_output(t->output());
}

void transpose(AtenNode& n, Builder& b) {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n.rank(0)));
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
  std::swap(perm.at(static_cast<std::size_t>(n.axis(0, n.int_(1)))),
            perm.at(static_cast<std::size_t>(n.axis(0, n.int_(2)))));
  torch::jit::Node* t = b.node("Transpose", {n.tensor(0)});
  t->is_(attr("perm"), perm);
  n.set_output(t->output());
}

// aten::cat(tensors, dim)
void cat(AtenNode& n, Builder& b) {
  torch::jit::Node* c = b.node("Concat", n.tensors(0));
  c->i_(attr("axis"), n.int_(1));
  n.set_output(c->output());
}

// aten::expand_as(self, other): the shape read from `other` when the file runs.
void expand_as(AtenNode& n, Builder& b) { n.set_output(b.op("Expand", {n.tensor(0), b.op("Shape", {n.tensor(1)})})); }

Value* slice(Builder& b, Value* x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step) {
  return b.op("Slice", {x, b.ints({start}), b.ints({end}), b.ints({axis}), b.ints({step})});
}

// aten::slice(self, dim, start, end, step)
void slice_op(AtenNode& n, Builder& b) {
  const std::int64_t axis = n.axis(0, n.int_(1));
  if (axis == 0) n.refuse("slicing the batch dimension");
  const std::int64_t start = n.is_none(2) ? 0 : n.int_(2);
  const std::int64_t end = n.is_none(3) ? std::numeric_limits<std::int64_t>::max() : n.int_(3);
  n.set_output(slice(b, n.tensor(0), axis, start, end, n.int_(4)));
}

// aten::narrow(self, dim, start, length)
void narrow(AtenNode& n, Builder& b) {
  const std::int64_t axis = n.axis(0, n.int_(1));
  if (axis == 0) n.refuse("narrowing the batch dimension");
  n.set_output(slice(b, n.tensor(0), axis, n.int_(2), n.int_(2) + n.int_(3), 1));
}

// aten::select(self, dim, index). Along the batch only the first sample, which every batch
// has (GPT-2 counts its positions from ids.select(0, 0)).
void select(AtenNode& n, Builder& b) {
  const std::int64_t axis = n.axis(0, n.int_(1));
  if (axis == 0 && n.int_(2) != 0) n.refuse("selecting a sample other than the first along the batch dimension");
  torch::jit::Node* g = b.node("Gather", {n.tensor(0), b.constant(at::scalar_tensor(n.int_(2), at::kLong))});
  g->i_(attr("axis"), axis);
  n.set_output(g->output());
}

// aten::chunk(self, chunks, dim): Split into ATen's chunk sizes.
void chunk(AtenNode& n, Builder& b) {
  const std::int64_t axis = n.axis(0, n.int_(2));
  if (axis == 0) n.refuse("chunking the batch dimension");
  const std::int64_t size = n.traced_sizes(0).at(static_cast<std::size_t>(axis)), chunks = n.int_(1);
  const std::int64_t each = (size + chunks - 1) / chunks;
  std::vector<std::int64_t> sizes;
  for (std::int64_t at = 0; at < size; at += each) sizes.push_back(std::min(each, size - at));
  torch::jit::Node* s = b.node("Split", {n.tensor(0), b.ints(sizes)}, sizes.size());
  s->i_(attr("axis"), axis);
  n.set_outputs({s->outputs().begin(), s->outputs().end()});
}

// ATen's causal mask, aligned top-left: query i sees keys 0..i. Made from the scores' own
// last two sizes when the file runs, so the sequence length stays symbolic.
Value* causal(Builder& b, Value* scores, at::ScalarType t) {
  Value* sizes =
      b.op("Slice", {b.op("Shape", {scores}), b.ints({-2}), b.ints({std::numeric_limits<std::int64_t>::max()})});
  torch::jit::Node* tril = b.node("Trilu", {b.op("Expand", {b.scalar(1.0, t), sizes})});
  tril->i_(attr("upper"), 0);
  Value* hidden = b.op("Equal", {tril->output(), b.scalar(0.0, t)});
  return b.op("Where", {hidden, b.scalar(-std::numeric_limits<double>::infinity(), t), scores});
}

// aten::scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa).
// With enable_gqa (k and v with fewer heads than q: grouped-query attention), q's heads are
// grouped by the k/v head they share, [.., kv_heads, group, time, width], and k and v gain
// a group axis of 1 that MatMul broadcasts: no copy of k or v.
void attention(AtenNode& n, Builder& b) {
  if (!n.is_none(3)) n.refuse("an attention mask");
  if (n.double_(4) != 0.0) n.refuse("attention dropout (export traces in eval mode)");
  const std::vector<std::int64_t> q_sizes = n.traced_sizes(0), k_sizes = n.traced_sizes(1);
  const std::int64_t rank = n.rank(0);
  const double scale = n.is_none(6) ? 1.0 / std::sqrt(static_cast<double>(q_sizes.back())) : n.double_(6);
  const bool grouped = n.inputs() > 7 && n.bool_(7) && rank == 4 && q_sizes[1] != k_sizes[1];
  Value *q = n.tensor(0), *k = n.tensor(1), *v = n.tensor(2);
  std::int64_t scores_rank = rank;
  if (grouped) {
    const std::int64_t kv_heads = k_sizes[1], group = q_sizes[1] / kv_heads;
    q = b.op("Reshape", {q, b.ints({0, kv_heads, group, -1, q_sizes.back()})});
    k = b.op("Unsqueeze", {k, b.ints({2})});
    v = b.op("Unsqueeze", {v, b.ints({2})});
    scores_rank = rank + 1;
  }
  std::vector<std::int64_t> perm(static_cast<std::size_t>(scores_rank));
  for (std::int64_t i = 0; i < scores_rank; ++i) perm[static_cast<std::size_t>(i)] = i;
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  torch::jit::Node* kt = b.node("Transpose", {k});
  kt->is_(attr("perm"), perm);
  Value* scores = b.op("Mul", {b.op("MatMul", {q, kt->output()}), b.scalar(scale, n.scalar_type(0))});
  if (n.bool_(5)) scores = causal(b, scores, n.scalar_type(0));
  torch::jit::Node* softmax = b.node("Softmax", {scores});
  softmax->i_(attr("axis"), -1);
  Value* y = b.op("MatMul", {softmax->output(), v});
  if (grouped) y = b.op("Reshape", {y, b.ints({0, q_sizes[1], -1, q_sizes.back()})});
  n.set_output(y);
}

// aten::to, every overload: a Cast to the traced output's type (nothing when it is the input's).
void cast_to(AtenNode& n, Builder& b) {
  const at::ScalarType target = n.output_scalar_type();
  if (target == n.scalar_type(0)) return n.set_output(n.tensor(0, target));
  torch::jit::Node* c = b.node("Cast", {n.tensor(0, n.scalar_type(0))});
  c->i_(attr("to"), onnx_element_type(n, target));
  n.set_output(c->output());
}

// aten::pow(self, exponent): Pow, the exponent a tensor or a number.
void pow_op(AtenNode& n, Builder& b) {
  const at::ScalarType t = n.scalar_type(0);
  n.set_output(b.op("Pow", {n.tensor(0, t), n.tensor(1, t)}));
}

// aten::rsqrt(self): 1 / sqrt(self).
void rsqrt(AtenNode& n, Builder& b) { n.set_output(b.op("Reciprocal", {b.op("Sqrt", {n.tensor(0)})})); }

// aten::unsqueeze(self, dim); the axes are an input from opset 13.
void unsqueeze(AtenNode& n, Builder& b) {
  const std::int64_t dim = n.int_(1) < 0 ? n.int_(1) + n.rank(0) + 1 : n.int_(1);
  n.set_output(b.op("Unsqueeze", {n.tensor(0, n.scalar_type(0)), b.ints({dim})}));
}

// aten::gelu(self, approximate): ONNX Gelu from opset 20, its formula before.
void gelu(AtenNode& n, Builder& b) {
  const std::string approximate = n.inputs() > 1 ? n.string(1) : "none";
  const at::ScalarType t = n.scalar_type(0);
  Value* x = n.tensor(0);
  if (b.opset() >= 20) {
    torch::jit::Node* g = b.node("Gelu", {x});
    g->s_(attr("approximate"), approximate);
    return n.set_output(g->output());
  }
  Value* inner;
  if (approximate == "tanh") {  // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
    Value* cube = b.op("Mul", {b.op("Mul", {x, x}), x});
    Value* sum = b.op("Add", {x, b.op("Mul", {cube, b.scalar(0.044715, t)})});
    inner = b.op("Tanh", {b.op("Mul", {sum, b.scalar(std::sqrt(2.0 / M_PI), t)})});
  } else {  // erf(x / sqrt(2))
    inner = b.op("Erf", {b.op("Mul", {x, b.scalar(M_SQRT1_2, t)})});
  }
  Value* half_x = b.op("Mul", {x, b.scalar(0.5, t)});
  n.set_output(b.op("Mul", {half_x, b.op("Add", {inner, b.scalar(1.0, t)})}));
}

// aten::embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse): rows of the table.
void embedding(AtenNode& n, Builder& b) {
  torch::jit::Node* g = b.node("Gather", {n.tensor(0), n.tensor(1)});
  g->i_(attr("axis"), 0);
  n.set_output(g->output());
}

// aten::ones_like(self, dtype, layout, device, pin_memory, memory_format): a one of the type,
// expanded to self's shape when the file runs.
void ones_like(AtenNode& n, Builder& b) {
  const at::ScalarType t = n.is_none(1) ? n.scalar_type(0) : static_cast<at::ScalarType>(n.int_(1));
  n.set_output(b.op("Expand", {b.scalar(1.0, t), b.op("Shape", {n.tensor(0)})}));
}

// aten::cumsum(self, dim, dtype)
void cumsum(AtenNode& n, Builder& b) {
  if (!n.is_none(2)) n.refuse("cumsum with a dtype");
  n.set_output(b.op("CumSum", {n.tensor(0), b.constant(at::scalar_tensor(n.axis(0, n.int_(1)), at::kLong))}));
}

// aten::mean(self, dim, keepdim, dtype)
void mean(AtenNode& n, Builder& b) {
  if (!n.is_none(3)) n.refuse("mean with a dtype");
  std::vector<std::int64_t> axes = n.ints(1);
  for (auto& a : axes) {
    a = n.axis(0, a);
    if (a == 0) n.refuse("a mean over the batch dimension");
  }
  torch::jit::Node* m =
      b.opset() >= 18 ? b.node("ReduceMean", {n.tensor(0), b.ints(axes)}) : b.node("ReduceMean", {n.tensor(0)});
  if (b.opset() < 18) m->is_(attr("axes"), axes);
  m->i_(attr("keepdims"), n.bool_(2) ? 1 : 0);
  n.set_output(m->output());
}

// aten::softmax(self, dim, dtype)
void softmax(AtenNode& n, Builder& b) {
  if (!n.is_none(2)) n.refuse("softmax with a dtype");
  torch::jit::Node* s = b.node("Softmax", {n.tensor(0)});
  s->i_(attr("axis"), n.int_(1));
  n.set_output(s->output());
}

// aten::addmm(self, mat1, mat2, beta, alpha): beta * self + alpha * mat1 @ mat2 (what
// torch::nn::Linear records for a 2-D input).
void addmm(AtenNode& n, Builder& b) {
  torch::jit::Node* g = b.node("Gemm", {n.tensor(1), n.tensor(2), n.tensor(0)});
  g->f_(attr("beta"), n.double_(3));
  g->f_(attr("alpha"), n.double_(4));
  n.set_output(g->output());
}

// aten::t(self): a matrix transposed (a vector or a scalar unchanged).
void matrix_transpose(AtenNode& n, Builder& b) {
  if (n.rank(0) < 2) return n.set_output(n.tensor(0));
  torch::jit::Node* tr = b.node("Transpose", {n.tensor(0)});
  tr->is_(attr("perm"), {1, 0});
  n.set_output(tr->output());
}

// aten::matmul(self, other)
void matmul(AtenNode& n, Builder& b) { n.set_output(b.op("MatMul", {n.tensor(0), n.tensor(1)})); }

}  // namespace

// ONNX's TensorProto element types of the ATen types export writes.
std::int64_t onnx_ops::onnx_element_type(AtenNode& n, at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return 1;
    case at::kInt:
      return 6;
    case at::kLong:
      return 7;
    case at::kBool:
      return 9;
    case at::kHalf:
      return 10;
    case at::kDouble:
      return 11;
    case at::kBFloat16:
      return 16;
    default:
      n.refuse(std::string("a cast to ") + c10::toString(t));
  }
}

const std::vector<OnnxTranslation>& onnx_op_table() {
  static const std::vector<OnnxTranslation> table = [] {
    std::vector<OnnxTranslation> t{
        {"aten::_convolution", "Conv, or ConvTranspose (transposed)", convolution},
        {"aten::adaptive_avg_pool2d", "GlobalAveragePool, AveragePool or Slice+ReduceMean+Concat", adaptive_avg_pool2d},
        {"aten::add", "Add", add},
        {"aten::add_", "Add", add},
        {"aten::addmm", "Gemm", addmm},
        {"aten::batch_norm", "BatchNormalization", batch_norm},
        {"aten::cat", "Concat", cat},
        {"aten::chunk", "Split", chunk},
        {"aten::contiguous", "(nothing)", identity},
        {"aten::cos", "Cos", [](AtenNode& n, Builder& b) { unary(n, b, "Cos"); }},
        {"aten::cumsum", "CumSum", cumsum},
        {"aten::dropout", "(nothing)", dropout},
        {"aten::dropout_", "(nothing)", dropout},
        {"aten::embedding", "Gather", embedding},
        {"aten::expand_as", "Shape+Expand", expand_as},
        {"aten::feature_dropout", "(nothing)", dropout},
        {"aten::flatten", "Flatten or Reshape", flatten},
        {"aten::gelu", "Gelu (opset 20+) or its formula", gelu},
        {"aten::hardsigmoid", "HardSigmoid", hardsigmoid},
        {"aten::hardsigmoid_", "HardSigmoid", hardsigmoid},
        {"aten::hardswish", "HardSwish", [](AtenNode& n, Builder& b) { unary(n, b, "HardSwish"); }},
        {"aten::hardswish_", "HardSwish", [](AtenNode& n, Builder& b) { unary(n, b, "HardSwish"); }},
        {"aten::hardtanh", "Clip", hardtanh},
        {"aten::hardtanh_", "Clip", hardtanh},
        {"aten::layer_norm", "LayerNormalization", layer_norm},
        {"aten::linear", "Gemm or Transpose+MatMul+Add", linear},
        {"aten::matmul", "MatMul", matmul},
        {"aten::mm", "MatMul", matmul},
        {"aten::max_pool2d", "MaxPool", max_pool2d},
        {"aten::mean", "ReduceMean", mean},
        {"aten::mul", "Mul", [](AtenNode& n, Builder& b) { binary(n, b, "Mul"); }},
        {"aten::mul_", "Mul", [](AtenNode& n, Builder& b) { binary(n, b, "Mul"); }},
        {"aten::narrow", "Slice", narrow},
        {"aten::neg", "Neg", [](AtenNode& n, Builder& b) { unary(n, b, "Neg"); }},
        {"aten::ones_like", "Shape+Expand", ones_like},
        {"aten::permute", "Transpose", permute},
        {"aten::relu", "Relu", [](AtenNode& n, Builder& b) { unary(n, b, "Relu"); }},
        {"aten::relu_", "Relu", [](AtenNode& n, Builder& b) { unary(n, b, "Relu"); }},
        {"aten::pow", "Pow", pow_op},
        {"aten::reshape", "Reshape", reshape},
        {"aten::rsqrt", "Sqrt+Reciprocal", rsqrt},
        {"aten::scaled_dot_product_attention",
         "MatMul+Mul+(causal: Trilu+Where)+Softmax+MatMul (grouped-query: Reshape+Unsqueeze)", attention},
        {"aten::select", "Gather", select},
        {"aten::sigmoid", "Sigmoid", [](AtenNode& n, Builder& b) { unary(n, b, "Sigmoid"); }},
        {"aten::sigmoid_", "Sigmoid", [](AtenNode& n, Builder& b) { unary(n, b, "Sigmoid"); }},
        {"aten::silu", "Sigmoid+Mul", silu},
        {"aten::sin", "Sin", [](AtenNode& n, Builder& b) { unary(n, b, "Sin"); }},
        {"aten::silu_", "Sigmoid+Mul", silu},
        {"aten::slice", "Slice", slice_op},
        {"aten::softmax", "Softmax", softmax},
        {"aten::sub", "Sub", [](AtenNode& n, Builder& b) { add_scaled(n, b, "Sub"); }},
        {"aten::t", "Transpose", matrix_transpose},
        {"aten::to", "Cast", cast_to},
        {"aten::transpose", "Transpose", transpose},
        {"aten::unflatten", "Reshape", unflatten},
        {"aten::unsqueeze", "Unsqueeze", unsqueeze},
        {"aten::upsample_bilinear2d", "Shape+Slice+Concat+Resize (linear)", upsample_bilinear2d},
        {"aten::view", "Reshape", reshape},
    };
    for (auto family : {elementwise_translations, reduction_translations, layer_translations, indexing_translations,
                        shape_translations}) {
      for (const OnnxTranslation& entry : family()) t.push_back(entry);
    }
    std::sort(t.begin(), t.end(),
              [](const OnnxTranslation& a, const OnnxTranslation& b) { return std::string_view(a.aten) < b.aten; });
    return t;
  }();
  return table;
}

const OnnxTranslation* find_onnx_translation(std::string_view aten) {
  const auto& table = onnx_op_table();
  auto found = std::lower_bound(table.begin(), table.end(), aten,
                                [](const OnnxTranslation& entry, std::string_view name) { return entry.aten < name; });
  return found != table.end() && found->aten == aten ? &*found : nullptr;
}

}  // namespace mixt
