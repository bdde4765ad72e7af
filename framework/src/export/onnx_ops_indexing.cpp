// Shape, indexing and selection ops (export/onnx_op_families.h): each refuses the batch
// axis, which the file keeps symbolic.
#include "export/onnx_op_families.h"

namespace mixt {

namespace {

using namespace onnx_ops;

// aten::clone(self, memory_format): the same values.
void clone(AtenNode& n, OnnxBuilder&) { n.set_output(n.tensor(0)); }

// aten::masked_fill(self, mask, value), in place or not: Where(mask, value, self).
void masked_fill(AtenNode& n, OnnxBuilder& b) {
  const at::ScalarType t = n.scalar_type(0);
  n.set_output(b.op("Where", {n.tensor(1), n.tensor(2, t), n.tensor(0, t)}));
}

// aten::gather(self, dim, index, sparse_grad): GatherElements.
void gather(AtenNode& n, OnnxBuilder& b) {
  const std::int64_t axis = n.axis(0, n.int_(1));
  if (axis == 0) n.refuse("gathering along the batch dimension");
  torch::jit::Node* g = b.node("GatherElements", {n.tensor(0), n.tensor(2)});
  g->i_(attr("axis"), axis);
  n.set_output(g->output());
}

// aten::__and__(self, other) on booleans: And.
void logical_and(AtenNode& n, OnnxBuilder& b) {
  if (n.scalar_type(0) != at::kBool) n.refuse("a bitwise and of integers (only booleans translate)");
  n.set_output(b.op("And", {n.tensor(0, at::kBool), n.tensor(1, at::kBool)}));
}

// aten::split(self, split_size, dim), aten::split_with_sizes(self, sizes, dim): Split into
// ATen's pieces.
void split(AtenNode& n, OnnxBuilder& b) {
  const std::int64_t axis = n.axis(0, n.int_(2));
  if (axis == 0) n.refuse("splitting the batch dimension");
  const std::int64_t size = n.traced_sizes(0).at(static_cast<std::size_t>(axis));
  std::vector<std::int64_t> sizes;
  if (is_list(n, 1)) {
    sizes = n.ints(1);
  } else {
    const std::int64_t each = n.int_(1);
    for (std::int64_t at = 0; at < size; at += each) sizes.push_back(std::min(each, size - at));
  }
  torch::jit::Node* s = b.node("Split", {n.tensor(0), b.ints(sizes)}, sizes.size());
  s->i_(attr("axis"), axis);
  n.set_outputs({s->outputs().begin(), s->outputs().end()});
}

// aten::roll(self, shifts, dims): per axis, the last `shift` entries moved to the front
// (Slice + Concat).
void roll(AtenNode& n, OnnxBuilder& b) {
  const std::vector<std::int64_t> shifts = n.ints(1), dims = n.ints(2);
  if (dims.empty() || dims.size() != shifts.size()) n.refuse("a roll of the flattened tensor (give dims)");
  const std::vector<std::int64_t> sizes = n.traced_sizes(0);
  Value* x = n.tensor(0);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t axis = n.axis(0, dims[i]);
    if (axis == 0) n.refuse("rolling the batch dimension");
    const std::int64_t size = sizes.at(static_cast<std::size_t>(axis));
    const std::int64_t shift = ((shifts[i] % size) + size) % size;
    if (shift == 0) continue;
    Value* tail = b.op("Slice", {x, b.ints({size - shift}), b.ints({size}), b.ints({axis})});
    Value* head = b.op("Slice", {x, b.ints({0}), b.ints({size - shift}), b.ints({axis})});
    torch::jit::Node* c = b.node("Concat", {tail, head});
    c->i_(attr("axis"), axis);
    x = c->output();
  }
  n.set_output(x);
}

}  // namespace

std::vector<OnnxTranslation> indexing_translations() {
  return {
      {"aten::__and__", "And", logical_and},
      {"aten::clone", "(nothing)", clone},
      {"aten::gather", "GatherElements", gather},
      {"aten::masked_fill", "Where", masked_fill},
      {"aten::masked_fill_", "Where", masked_fill},
      {"aten::roll", "Slice+Concat", roll},
      {"aten::split", "Split", split},
      {"aten::split_with_sizes", "Split", split},
  };
}

}  // namespace mixt
