#include "export/onnx_builder.h"

#include <torch/csrc/jit/ir/constants.h>

namespace mixt {

OnnxBuilder::OnnxBuilder(std::int64_t opset) : opset_(opset), graph_(std::make_shared<torch::jit::Graph>()) {}

torch::jit::Node* OnnxBuilder::node(const char* type, const std::vector<Value*>& inputs, std::size_t outputs) {
  torch::jit::Node* n = graph_->create(c10::Symbol::onnx(type), inputs, outputs);
  return graph_->insertNode(n);
}

Value* OnnxBuilder::op(const char* type, const std::vector<Value*>& inputs) { return node(type, inputs)->output(); }

Value* OnnxBuilder::constant(const at::Tensor& value) {
  torch::jit::Node* n = node("Constant", {});
  n->t_(c10::attr::value, value.detach().clone().contiguous());
  return n->output();
}

Value* OnnxBuilder::ints(const std::vector<std::int64_t>& values) {
  return constant(at::tensor(values, at::TensorOptions().dtype(at::kLong)));
}

Value* OnnxBuilder::scalar(double value, at::ScalarType type) {
  return constant(at::scalar_tensor(value, at::TensorOptions().dtype(type)));
}

Value* OnnxBuilder::none() { return graph_->insertNode(graph_->createNone())->output(); }

AtenNode::AtenNode(const torch::jit::Node* node, OnnxBuilder& builder, const std::map<const Value*, Value*>& tensors,
                   const std::map<const Value*, std::vector<Value*>>& tensor_lists)
    : node_(node),
      builder_(builder),
      tensors_(tensors),
      tensor_lists_(tensor_lists),
      outputs_(node->outputs().size(), nullptr) {}

c10::IValue AtenNode::constant_of(std::size_t i) const {
  const Value* v = node_->inputs().at(i);
  if (auto value = torch::jit::toIValue(v)) return *value;
  if (v->node()->kind() == c10::prim::ListConstruct) {
    c10::impl::GenericList ints(c10::IntType::get());
    for (const Value* item : v->node()->inputs()) {
      auto value = torch::jit::toIValue(item);
      if (!value || !value->isInt()) refuse("argument " + std::to_string(i) + " is a list computed in the forward");
      ints.push_back(*value);
    }
    return ints;
  }
  refuse("argument " + std::to_string(i) + " (" + v->type()->str() + ") is computed in the forward, not a constant");
}

bool AtenNode::is_tensor(std::size_t i) const { return tensors_.count(node_->inputs().at(i)) > 0; }

bool AtenNode::is_none(std::size_t i) const {
  if (i >= node_->inputs().size()) return true;
  const Value* v = node_->inputs().at(i);
  return v->node()->mustBeNone() || v->type()->kind() == c10::TypeKind::NoneType;
}

Value* AtenNode::tensor(std::size_t i, at::ScalarType scalar_type) const {
  const Value* v = node_->inputs().at(i);
  if (auto found = tensors_.find(v); found != tensors_.end()) return found->second;
  const c10::IValue value = constant_of(i);
  if (value.isTensor()) return builder_.constant(value.toTensor());
  if (value.isDouble() || value.isInt() || value.isBool())
    return builder_.scalar(value.toScalar().toDouble(), scalar_type);
  refuse("argument " + std::to_string(i) + " is neither a tensor nor a number");
}

std::vector<Value*> AtenNode::tensors(std::size_t i) const {
  std::vector<Value*> items = optional_tensors(i);
  for (const Value* item : items) {
    if (!item) refuse("argument " + std::to_string(i) + " is a list with None in it");
  }
  return items;
}

std::vector<Value*> AtenNode::optional_tensors(std::size_t i) const {
  const Value* v = node_->inputs().at(i);
  if (auto found = tensor_lists_.find(v); found != tensor_lists_.end()) return found->second;
  refuse("argument " + std::to_string(i) + " is not a list of tensors the trace recorded");
}

std::int64_t AtenNode::int_(std::size_t i) const {
  const c10::IValue value = constant_of(i);
  if (!value.isInt()) refuse("argument " + std::to_string(i) + " is not an integer");
  return value.toInt();
}

double AtenNode::double_(std::size_t i) const {
  const c10::IValue value = constant_of(i);
  if (!value.isDouble() && !value.isInt()) refuse("argument " + std::to_string(i) + " is not a number");
  return value.toScalar().toDouble();
}

bool AtenNode::bool_(std::size_t i) const {
  const c10::IValue value = constant_of(i);
  if (!value.isBool()) refuse("argument " + std::to_string(i) + " is not a bool");
  return value.toBool();
}

std::string AtenNode::string(std::size_t i) const {
  const c10::IValue value = constant_of(i);
  if (!value.isString()) refuse("argument " + std::to_string(i) + " is not a string");
  return value.toStringRef();
}

std::vector<std::int64_t> AtenNode::ints(std::size_t i) const {
  const c10::IValue value = constant_of(i);
  if (value.isInt()) return {value.toInt()};
  if (!value.isIntList()) refuse("argument " + std::to_string(i) + " is not a list of integers");
  return value.toIntVector();
}

Value* AtenNode::int_list(std::size_t i) const {
  const Value* v = node_->inputs().at(i);
  if (v->node()->kind() != c10::prim::ListConstruct) return builder_.ints(ints(i));
  std::vector<Value*> items;
  bool computed = false;
  for (const Value* item : v->node()->inputs()) {
    if (auto found = tensors_.find(item); found != tensors_.end()) {
      items.push_back(builder_.op("Unsqueeze", {found->second, builder_.ints({0})}));
      computed = true;
    } else if (auto value = torch::jit::toIValue(item); value && value->isInt()) {
      items.push_back(builder_.ints({value->toInt()}));
    } else {
      refuse("argument " + std::to_string(i) + " is a list with an item neither a number nor a traced size");
    }
  }
  if (!computed) return builder_.ints(ints(i));
  torch::jit::Node* concat = builder_.node("Concat", items);
  concat->i_(OnnxBuilder::attr("axis"), 0);
  return concat->output();
}

std::int64_t AtenNode::rank(std::size_t i) const { return static_cast<std::int64_t>(traced_sizes(i).size()); }

c10::TensorTypePtr AtenNode::traced_type(std::size_t i) const {
  const Value* v = node_->inputs().at(i);
  c10::TensorTypePtr type = v->type()->cast<c10::TensorType>();
  // A parameter's traced type is the attribute's (no sizes); its ONNX input has the tensor's.
  if ((!type || !type->sizes().concrete_sizes()) && tensors_.count(v)) {
    type = tensors_.at(v)->type()->cast<c10::TensorType>();
  }
  return type;
}

std::vector<std::int64_t> AtenNode::traced_sizes(std::size_t i) const {
  const c10::TensorTypePtr type = traced_type(i);
  if (!type || !type->sizes().concrete_sizes()) refuse("the trace recorded no shape for argument " + std::to_string(i));
  return *type->sizes().concrete_sizes();
}

at::ScalarType AtenNode::scalar_type(std::size_t i) const {
  const c10::TensorTypePtr type = traced_type(i);
  return type && type->scalarType() ? *type->scalarType() : at::kFloat;
}

at::ScalarType AtenNode::output_scalar_type() const {
  const c10::TensorTypePtr type = node_->output(0)->type()->cast<c10::TensorType>();
  return type && type->scalarType() ? *type->scalarType() : at::kFloat;
}

std::int64_t AtenNode::axis(std::size_t i, std::int64_t dim) const { return dim < 0 ? dim + rank(i) : dim; }

void AtenNode::set_output(Value* value, std::size_t i) { outputs_.at(i) = value; }

void AtenNode::set_outputs(const std::vector<Value*>& values) { output_list_ = values; }

void AtenNode::refuse(const std::string& why) const { throw Untranslatable{why}; }

}  // namespace mixt
