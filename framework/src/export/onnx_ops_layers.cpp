// Pooling, normalization, resampling and padding (export/onnx_op_families.h). Sizes the
// trace fixed (kernels, output sizes, pads) are constants; the batch is read from the input.
#include <cmath>
#include <limits>

#include "export/onnx_op_families.h"

namespace mixt {

namespace {

using namespace onnx_ops;

// aten::avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
void avg_pool2d(AtenNode& n, OnnxBuilder& b) {
  if (n.inputs() > 6 && !n.is_none(6)) n.refuse("average pooling with a divisor_override");
  const std::vector<std::int64_t> kernel = per_dimension(n.ints(1), 2);
  std::vector<std::int64_t> stride = n.ints(2);
  if (stride.empty()) stride = kernel;
  torch::jit::Node* p = b.node("AveragePool", {n.tensor(0)});
  p->is_(attr("kernel_shape"), kernel);
  p->is_(attr("strides"), per_dimension(stride, 2));
  p->is_(attr("pads"), twice(per_dimension(n.ints(3), 2)));
  p->i_(attr("ceil_mode"), n.bool_(4) ? 1 : 0);
  p->i_(attr("count_include_pad"), n.bool_(5) ? 1 : 0);
  n.set_output(p->output());
}

// aten::group_norm(input, num_groups, weight, bias, eps, cudnn_enabled): the input as
// [batch, groups, rest], InstanceNormalization over `rest` (each group's statistics), back
// to the input's shape, then the per-channel weight and bias.
void group_norm(AtenNode& n, OnnxBuilder& b) {
  const std::vector<std::int64_t> sizes = n.traced_sizes(0);
  const std::int64_t groups = n.int_(1), channels = sizes.at(1);
  const at::ScalarType t = n.scalar_type(0);
  Value* x = n.tensor(0);
  Value* grouped = b.op("Reshape", {x, b.ints({0, groups, -1})});
  torch::jit::Node* norm = b.node("InstanceNormalization", {grouped, b.constant(at::ones({groups}, at::dtype(t))),
                                                            b.constant(at::zeros({groups}, at::dtype(t)))});
  norm->f_(attr("epsilon"), n.double_(4));
  Value* y = b.op("Reshape", {norm->output(), b.op("Shape", {x})});
  std::vector<std::int64_t> per_channel(sizes.size() - 1, 1);
  per_channel[0] = channels;  // [channels, 1, ...]: broadcast over the spatial axes
  if (!n.is_none(2)) y = b.op("Mul", {y, b.op("Reshape", {n.tensor(2), b.ints(per_channel)})});
  if (!n.is_none(3)) y = b.op("Add", {y, b.op("Reshape", {n.tensor(3), b.ints(per_channel)})});
  n.set_output(y);
}

// aten::upsample_nearest2d(self, output_size, scales_h, scales_w): Resize (nearest, ATen's
// floor(out * in / out_size) source index: asymmetric, floor) to the traced output size.
void upsample_nearest2d(AtenNode& n, OnnxBuilder& b) {
  torch::jit::Node* resize = resize_to_traced_size(n, b);
  resize->s_(attr("mode"), "nearest");
  resize->s_(attr("coordinate_transformation_mode"), "asymmetric");
  resize->s_(attr("nearest_mode"), "floor");
  n.set_output(resize->output());
}

// ATen's pad list (last dimension first: begin, end, then the one before, ...) as ONNX's
// pads (every axis's begin, then every axis's end); the batch is never padded.
std::vector<std::int64_t> onnx_pads(AtenNode& n, const std::vector<std::int64_t>& aten, std::int64_t rank) {
  if (aten.size() % 2 != 0 || static_cast<std::int64_t>(aten.size()) / 2 > rank - 1) {
    n.refuse("padding the batch dimension");
  }
  std::vector<std::int64_t> pads(static_cast<std::size_t>(2 * rank), 0);
  for (std::size_t i = 0; i < aten.size() / 2; ++i) {
    const std::size_t axis = static_cast<std::size_t>(rank) - 1 - i;
    pads[axis] = aten[2 * i];
    pads[axis + static_cast<std::size_t>(rank)] = aten[2 * i + 1];
  }
  return pads;
}

void pad(AtenNode& n, OnnxBuilder& b, const char* mode, std::vector<Value*> extra) {
  std::vector<Value*> inputs{n.tensor(0), b.ints(onnx_pads(n, n.ints(1), n.rank(0)))};
  inputs.insert(inputs.end(), extra.begin(), extra.end());
  torch::jit::Node* p = b.node("Pad", inputs);
  p->s_(attr("mode"), mode);
  n.set_output(p->output());
}

// aten::constant_pad_nd(self, pad, value)
void constant_pad_nd(AtenNode& n, OnnxBuilder& b) {
  pad(n, b, "constant", {b.scalar(n.inputs() > 2 ? n.double_(2) : 0.0, n.scalar_type(0))});
}
void reflection_pad(AtenNode& n, OnnxBuilder& b) { pad(n, b, "reflect", {}); }
void replication_pad(AtenNode& n, OnnxBuilder& b) { pad(n, b, "edge", {}); }

// aten::pad(self, pad, mode, value): F.pad, by its mode.
void pad_by_mode(AtenNode& n, OnnxBuilder& b) {
  const std::string mode = n.inputs() > 2 && !n.is_none(2) ? n.string(2) : "constant";
  if (mode == "constant") {
    return pad(n, b, "constant", {b.scalar(n.inputs() > 3 && !n.is_none(3) ? n.double_(3) : 0.0, n.scalar_type(0))});
  }
  if (mode == "reflect") return pad(n, b, "reflect", {});
  if (mode == "replicate") return pad(n, b, "edge", {});
  n.refuse("padding mode '" + mode + "'");
}

// aten::instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
// momentum, eps, cudnn_enabled): InstanceNormalization, scale 1 and bias 0 when absent.
void instance_norm(AtenNode& n, OnnxBuilder& b) {
  if (!n.bool_(5)) n.refuse("instance norm with running statistics (track_running_stats in eval mode)");
  const std::int64_t channels = n.traced_sizes(0).at(1);
  const at::TensorOptions options(n.scalar_type(0));
  Value* scale = n.is_none(1) ? b.constant(at::ones({channels}, options)) : n.tensor(1);
  Value* bias = n.is_none(2) ? b.constant(at::zeros({channels}, options)) : n.tensor(2);
  torch::jit::Node* norm = b.node("InstanceNormalization", {n.tensor(0), scale, bias});
  norm->f_(attr("epsilon"), n.double_(7));
  n.set_output(norm->output());
}

// aten::upsample_bicubic2d(self, output_size, align_corners, scales_h, scales_w): Resize
// (cubic, PyTorch's A = -0.75), the batch and channels from the input's shape.
void upsample_bicubic2d(AtenNode& n, OnnxBuilder& b) {
  torch::jit::Node* resize = resize_to_traced_size(n, b);
  resize->s_(attr("mode"), "cubic");
  resize->f_(attr("cubic_coeff_a"), -0.75);
  resize->s_(attr("coordinate_transformation_mode"), n.bool_(2) ? "align_corners" : "pytorch_half_pixel");
  n.set_output(resize->output());
}

// Rows [first, first + count) of a 1-D or 2-D tensor (a slice of the packed projections).
Value* rows(OnnxBuilder& b, Value* x, std::int64_t first, std::int64_t count) {
  return b.op("Slice", {x, b.ints({first}), b.ints({first + count}), b.ints({0})});
}

// x @ w^T + bias, with w [out, in] as torch.nn.Linear keeps it.
Value* projection(OnnxBuilder& b, Value* x, Value* w, Value* bias) {
  torch::jit::Node* t = b.node("Transpose", {w});
  t->is_(attr("perm"), {1, 0});
  return b.op("Add", {b.op("MatMul", {x, t->output()}), bias});
}

// aten::_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight,
// qkv_bias, proj_weight, proj_bias, mask, need_weights, average_attn_weights, mask_type):
// nn.MultiheadAttention's inference path (torchvision's ViT), batch first. The packed
// projections are sliced into q, k and v; heads are [batch, heads, time, width] by Reshape
// (0 keeps the batch symbolic) and Transpose; the weights output only when asked.
void native_multi_head_attention(AtenNode& n, OnnxBuilder& b) {
  if (!n.is_none(9)) n.refuse("an attention mask");
  if (n.rank(0) != 3) n.refuse("unbatched input");
  const std::int64_t embed = n.int_(3), heads = n.int_(4), width = embed / heads;
  Value* weight = n.tensor(5);
  Value* bias = n.tensor(6);
  const auto heads_first = [&](Value* x) {
    torch::jit::Node* t = b.node("Transpose", {b.op("Reshape", {x, b.ints({0, 0, heads, width})})});
    t->is_(attr("perm"), {0, 2, 1, 3});
    return t->output();
  };
  Value* q = heads_first(projection(b, n.tensor(0), rows(b, weight, 0, embed), rows(b, bias, 0, embed)));
  Value* k = heads_first(projection(b, n.tensor(1), rows(b, weight, embed, embed), rows(b, bias, embed, embed)));
  Value* v =
      heads_first(projection(b, n.tensor(2), rows(b, weight, 2 * embed, embed), rows(b, bias, 2 * embed, embed)));
  torch::jit::Node* kt = b.node("Transpose", {k});
  kt->is_(attr("perm"), {0, 1, 3, 2});
  const at::ScalarType type = n.scalar_type(0);
  Value* scores = b.op("Mul", {b.op("MatMul", {q, kt->output()}), b.scalar(1.0 / std::sqrt(double(width)), type)});
  torch::jit::Node* softmax = b.node("Softmax", {scores});
  softmax->i_(attr("axis"), -1);
  torch::jit::Node* merged = b.node("Transpose", {b.op("MatMul", {softmax->output(), v})});
  merged->is_(attr("perm"), {0, 2, 1, 3});
  Value* out = b.op("Reshape", {merged->output(), b.ints({0, 0, embed})});
  n.set_output(projection(b, out, n.tensor(7), n.tensor(8)), 0);
  if (!n.bool_(10)) return n.set_output(b.constant(at::empty({0}, at::TensorOptions(type))), 1);
  if (!n.bool_(11)) return n.set_output(softmax->output(), 1);
  // The weights averaged over the heads: ReduceMean's axes are an input from opset 18.
  torch::jit::Node* mean = b.opset() >= 18 ? b.node("ReduceMean", {softmax->output(), b.ints({1})})
                                           : b.node("ReduceMean", {softmax->output()});
  if (b.opset() < 18) mean->is_(attr("axes"), {1});
  mean->i_(attr("keepdims"), 0);
  n.set_output(mean->output(), 1);
}

}  // namespace

torch::jit::Node* onnx_ops::resize_to_traced_size(AtenNode& n, OnnxBuilder& b) {
  if (n.is_none(1)) n.refuse("an output size given as scale factors");
  Value* x = n.tensor(0);
  Value* leading = b.op("Slice", {b.op("Shape", {x}), b.ints({0}), b.ints({2}), b.ints({0})});
  torch::jit::Node* sizes = b.node("Concat", {leading, n.int_list(1)});
  sizes->i_(attr("axis"), 0);
  return b.node("Resize", {x, b.none(), b.none(), sizes->output()});
}

std::vector<OnnxTranslation> layer_translations() {
  return {
      {"aten::_native_multi_head_attention", "Slice+MatMul+Add+Reshape+Transpose+Softmax (the fused MHA)",
       native_multi_head_attention},
      {"aten::avg_pool2d", "AveragePool", avg_pool2d},
      {"aten::constant_pad_nd", "Pad (constant)", constant_pad_nd},
      {"aten::group_norm", "Reshape+InstanceNormalization+Reshape+Mul+Add", group_norm},
      {"aten::instance_norm", "InstanceNormalization", instance_norm},
      {"aten::pad", "Pad (constant, reflect or edge by mode)", pad_by_mode},
      {"aten::reflection_pad1d", "Pad (reflect)", reflection_pad},
      {"aten::reflection_pad2d", "Pad (reflect)", reflection_pad},
      {"aten::replication_pad1d", "Pad (edge)", replication_pad},
      {"aten::replication_pad2d", "Pad (edge)", replication_pad},
      {"aten::upsample_bicubic2d", "Shape+Slice+Concat+Resize (cubic)", upsample_bicubic2d},
      {"aten::upsample_nearest2d", "Shape+Slice+Concat+Resize (nearest)", upsample_nearest2d},
  };
}

}  // namespace mixt
