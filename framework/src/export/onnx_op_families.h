// The op table's families beyond the zoo's core (export/onnx_op_table.cpp), one file each:
// each returns its translations, which onnx_op_table() merges and sorts.
#pragma once

#include <cstdint>
#include <vector>

#include "export/onnx_op_table.h"

namespace mixt {

// What the translations of every family share.
namespace onnx_ops {
inline c10::Symbol attr(const char* name) { return OnnxBuilder::attr(name); }
// Whether argument i of the traced node is a list (aten::split's size or sizes).
inline bool is_list(const AtenNode& n, std::size_t i) {
  return n.traced().inputs().at(i)->type()->kind() == c10::TypeKind::ListType;
}
// A list argument of one value applies to every spatial dimension, as ATen reads it.
inline std::vector<std::int64_t> per_dimension(std::vector<std::int64_t> values, std::size_t dims) {
  if (values.size() == 1 && dims > 1) values.assign(dims, values[0]);
  return values;
}
// ATen's symmetric pads as ONNX's begins then ends.
inline std::vector<std::int64_t> twice(const std::vector<std::int64_t>& pads) {
  std::vector<std::int64_t> out = pads;
  out.insert(out.end(), pads.begin(), pads.end());
  return out;
}
inline void unary(AtenNode& n, OnnxBuilder& b, const char* type) { n.set_output(b.op(type, {n.tensor(0)})); }
// aten::upsample_*(self, output_size, ...): a Resize of self to the output size (the
// trace's numbers, or sizes the forward read from a tensor: mixt::upsample_bilinear_like),
// the batch and channels read from self's shape (the batch stays symbolic); the caller sets
// its mode. Scale factors instead of a size are refused.
torch::jit::Node* resize_to_traced_size(AtenNode& n, OnnxBuilder& b);
// ONNX's TensorProto element type of an ATen type export writes (refused otherwise).
std::int64_t onnx_element_type(AtenNode& n, at::ScalarType t);
}  // namespace onnx_ops

// Elementwise math, comparisons and activations: tanh, exp, log, sqrt, abs, erf,
// reciprocal, div, maximum, minimum, clamp, gt/lt/ge/le/eq/ne, leaky_relu, elu, softplus,
// log_softmax.
std::vector<OnnxTranslation> elementwise_translations();
// Reductions and selection: sum, amax, amin, where, stack, squeeze.
std::vector<OnnxTranslation> reduction_translations();
// Pooling, normalization, resampling and padding: avg_pool2d, group_norm, instance_norm,
// upsample_nearest2d, upsample_bicubic2d, constant/reflection/replication padding, pad.
std::vector<OnnxTranslation> layer_translations();
// Shape, indexing and selection: clone, masked_fill, gather, split, roll, and (booleans).
std::vector<OnnxTranslation> indexing_translations();
// Creation, shape arithmetic and indexing (arange, zeros/ones/full and new_*, fill_, zero_,
// expand, repeat, flip, index_select, index, floor_divide, remainder) and batched matrix
// products (bmm, baddbmm, einsum).
std::vector<OnnxTranslation> shape_translations();

}  // namespace mixt
