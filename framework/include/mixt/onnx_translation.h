// mixt/onnx_translation.h — a plugin's own ONNX translations for `mixt export` (since ABI
// 6.3): for an op mixt's built-in table lacks, or for a custom op of the plugin's own
// (TORCH_LIBRARY), the plugin says which ONNX nodes it becomes:
//
//   // myops::swish(Tensor x, float beta) -> Tensor  is  x * Sigmoid(beta * x)
//   void swish(mixt::OnnxOp& op) {
//     const mixt::OnnxValue x = op.tensor(0);
//     const mixt::OnnxValue scaled = op.add("Mul", {x, op.scalar(op.double_(1), op.scalar_type(0))});
//     op.set_output(op.add("Mul", {x, op.add("Sigmoid", {scaled})}));
//   }
//   registrar.add_onnx_translation("myops::swish", "Mul+Sigmoid+Mul", swish);
//
// The export traces the model, then writes each traced node through its translation: the
// plugin's, when one is registered for that op (it wins over a built-in entry), else the
// built-in table's (docs/deploy.md lists it; `mixt export SOURCE --list-ops` says which a
// model uses). Arguments are read as the op's schema orders them. The batch dimension is
// symbolic in the file: build shapes from the other dimensions, or from Shape nodes.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace mixt {

// A value of the ONNX graph being written; only the OnnxOp that made it reads it.
struct OnnxValue {
  void* handle = nullptr;
};

// An attribute of an ONNX node: int, float, string, ints or floats.
using OnnxAttribute = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>, std::vector<double>>;

// One traced node being translated: its arguments, and the graph it writes into.
class OnnxOp {
 public:
  virtual ~OnnxOp() = default;

  // The opset being written (17 to 21).
  virtual std::int64_t opset() const = 0;
  // The traced op's arguments, by position in its schema.
  virtual std::size_t inputs() const = 0;
  virtual bool is_tensor(std::size_t i) const = 0;  // a tensor, not a constant or None
  virtual bool is_none(std::size_t i) const = 0;
  // Argument i as an ONNX value: a tensor, or a constant number as a 0-D tensor of `type`.
  virtual OnnxValue tensor(std::size_t i, at::ScalarType type = at::kFloat) const = 0;
  // Constant arguments (the trace recorded their values).
  virtual std::int64_t int_(std::size_t i) const = 0;
  virtual double double_(std::size_t i) const = 0;
  virtual bool bool_(std::size_t i) const = 0;
  virtual std::vector<std::int64_t> ints(std::size_t i) const = 0;
  // What the trace saw of tensor argument i (dimension 0 of sizes is the batch's, symbolic
  // in the file: do not bake it in).
  virtual std::int64_t rank(std::size_t i) const = 0;
  virtual std::vector<std::int64_t> traced_sizes(std::size_t i) const = 0;
  virtual at::ScalarType scalar_type(std::size_t i) const = 0;

  // An ONNX node of `type` (the default domain) on `inputs` (an absent optional input:
  // OnnxValue{}), with `outputs` outputs.
  virtual std::vector<OnnxValue> add_node(const std::string& type, const std::vector<OnnxValue>& inputs,
                                          const std::map<std::string, OnnxAttribute>& attributes = {},
                                          std::size_t outputs = 1) = 0;
  // add_node()'s one output.
  OnnxValue add(const std::string& type, const std::vector<OnnxValue>& inputs,
                const std::map<std::string, OnnxAttribute>& attributes = {}) {
    return add_node(type, inputs, attributes).front();
  }
  virtual OnnxValue constant(const at::Tensor& value) = 0;                       // an initializer-free constant
  virtual OnnxValue ints_constant(const std::vector<std::int64_t>& values) = 0;  // 1-D int64 (shapes, axes)
  virtual OnnxValue scalar(double value, at::ScalarType type) = 0;               // 0-D, of `type`

  // The value of the traced node's output i.
  virtual void set_output(OnnxValue value, std::size_t i = 0) = 0;
  // This use of the op cannot be written (an argument the translation does not support):
  // the export is refused, naming the op, the module and `why`.
  [[noreturn]] virtual void refuse(const std::string& why) const = 0;
};

using OnnxTranslator = std::function<void(OnnxOp& op)>;

}  // namespace mixt
