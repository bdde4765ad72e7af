// The vocabulary of the ATen -> ONNX op table (export/onnx_op_table.h): OnnxBuilder makes
// onnx:: nodes in the graph being written; AtenNode reads a traced ATen node's arguments
// (tensors already translated, constants as values) and receives its outputs.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mixt {

using torch::jit::Value;

class OnnxBuilder {
 public:
  explicit OnnxBuilder(std::int64_t opset);
  std::int64_t opset() const { return opset_; }
  torch::jit::Graph& graph() { return *graph_; }
  std::shared_ptr<torch::jit::Graph> shared_graph() const { return graph_; }

  // An onnx::`type` node on `inputs` with `outputs` outputs, appended to the graph; the
  // caller sets its attributes (n->i_(attr("axis"), 1), ->is_, ->f_, ->s_).
  torch::jit::Node* node(const char* type, const std::vector<Value*>& inputs, std::size_t outputs = 1);
  // node(...)->output() for one-output nodes without attributes.
  Value* op(const char* type, const std::vector<Value*>& inputs);
  // A constant tensor (onnx::Constant).
  Value* constant(const at::Tensor& value);
  // A 1-D int64 constant (shapes, axes, pads).
  Value* ints(const std::vector<std::int64_t>& values);
  // A 0-D constant of `type` (a scalar operand, matching the tensor it meets).
  Value* scalar(double value, at::ScalarType type);
  // An absent optional input.
  Value* none();

  static c10::Symbol attr(const char* name) { return c10::Symbol::attr(name); }

 private:
  std::int64_t opset_;
  std::shared_ptr<torch::jit::Graph> graph_;
};

// Thrown by a translation that cannot express this use of its op (an argument it does not
// support); the translation walk adds the op, the module and the opset.
struct Untranslatable {
  std::string why;
};

class AtenNode {
 public:
  AtenNode(const torch::jit::Node* node, OnnxBuilder& builder, const std::map<const Value*, Value*>& tensors,
           const std::map<const Value*, std::vector<Value*>>& tensor_lists);

  const torch::jit::Node& traced() const { return *node_; }
  std::size_t inputs() const { return node_->inputs().size(); }
  // Input i as an ONNX tensor: a translated tensor, or a constant (a number becomes a 0-D
  // tensor of `scalar_type`, the type of the tensor it combines with).
  Value* tensor(std::size_t i, at::ScalarType scalar_type = at::kFloat) const;
  std::vector<Value*> tensors(std::size_t i) const;  // a Tensor[] input
  std::vector<Value*> optional_tensors(std::size_t i) const;  // a Tensor?[] input: null for None
  bool is_tensor(std::size_t i) const;               // a tensor, not a number or None
  bool is_none(std::size_t i) const;
  std::int64_t int_(std::size_t i) const;
  double double_(std::size_t i) const;
  bool bool_(std::size_t i) const;
  std::string string(std::size_t i) const;
  std::vector<std::int64_t> ints(std::size_t i) const;
  // An int[] input as a 1-D int64 tensor: the constant list, or one whose items the forward
  // read from tensors' shapes (aten::size), each as the graph computes it.
  Value* int_list(std::size_t i) const;
  // What the trace saw of a tensor input: its rank, its sizes (use only the non-batch
  // dimensions: dimension 0 is symbolic in the file), its scalar type.
  std::int64_t rank(std::size_t i) const;
  std::vector<std::int64_t> traced_sizes(std::size_t i) const;
  at::ScalarType scalar_type(std::size_t i) const;
  // The traced output's element type (what aten::to made).
  at::ScalarType output_scalar_type() const;
  // `dim` (possibly negative) of input i's dimensions, made non-negative.
  std::int64_t axis(std::size_t i, std::int64_t dim) const;

  void set_output(Value* value, std::size_t i = 0);
  void set_outputs(const std::vector<Value*>& values);  // a Tensor[] output (chunk, split)
  const std::vector<Value*>& outputs() const { return outputs_; }
  const std::vector<Value*>& output_list() const { return output_list_; }

  [[noreturn]] void refuse(const std::string& why) const;

 private:
  c10::IValue constant_of(std::size_t i) const;
  c10::TensorTypePtr traced_type(std::size_t i) const;

  const torch::jit::Node* node_;
  OnnxBuilder& builder_;
  const std::map<const Value*, Value*>& tensors_;
  const std::map<const Value*, std::vector<Value*>>& tensor_lists_;
  std::vector<Value*> outputs_;
  std::vector<Value*> output_list_;
};

}  // namespace mixt
