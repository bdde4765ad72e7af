#include "export/plugin_onnx_op.h"

#include <c10/util/Exception.h>

namespace mixt {

namespace {

Value* value_of(OnnxValue value) { return static_cast<Value*>(value.handle); }
OnnxValue wrap(Value* value) { return OnnxValue{value}; }

// Sets one attribute on an ONNX node, whichever of OnnxAttribute's types it holds.
struct SetAttribute {
  torch::jit::Node* node;
  c10::Symbol name;
  void operator()(std::int64_t v) const { node->i_(name, v); }
  void operator()(double v) const { node->f_(name, v); }
  void operator()(const std::string& v) const { node->s_(name, v); }
  void operator()(const std::vector<std::int64_t>& v) const { node->is_(name, v); }
  void operator()(const std::vector<double>& v) const { node->fs_(name, v); }
};

class PluginOnnxOp final : public OnnxOp {
 public:
  PluginOnnxOp(AtenNode& node, OnnxBuilder& builder) : node_(node), builder_(builder) {}

  std::int64_t opset() const override { return builder_.opset(); }
  std::size_t inputs() const override { return node_.inputs(); }
  bool is_tensor(std::size_t i) const override { return node_.is_tensor(i); }
  bool is_none(std::size_t i) const override { return node_.is_none(i); }
  OnnxValue tensor(std::size_t i, at::ScalarType type) const override { return wrap(node_.tensor(i, type)); }
  std::int64_t int_(std::size_t i) const override { return node_.int_(i); }
  double double_(std::size_t i) const override { return node_.double_(i); }
  bool bool_(std::size_t i) const override { return node_.bool_(i); }
  std::vector<std::int64_t> ints(std::size_t i) const override { return node_.ints(i); }
  std::int64_t rank(std::size_t i) const override { return node_.rank(i); }
  std::vector<std::int64_t> traced_sizes(std::size_t i) const override { return node_.traced_sizes(i); }
  at::ScalarType scalar_type(std::size_t i) const override { return node_.scalar_type(i); }

  std::vector<OnnxValue> add_node(const std::string& type, const std::vector<OnnxValue>& inputs,
                                  const std::map<std::string, OnnxAttribute>& attributes,
                                  std::size_t outputs) override {
    std::vector<Value*> values;
    for (const OnnxValue& input : inputs) values.push_back(input.handle ? value_of(input) : builder_.none());
    torch::jit::Node* made = builder_.node(type.c_str(), values, outputs);
    for (const auto& [name, value] : attributes) std::visit(SetAttribute{made, OnnxBuilder::attr(name.c_str())}, value);
    std::vector<OnnxValue> out;
    for (Value* output : made->outputs()) out.push_back(wrap(output));
    return out;
  }
  OnnxValue constant(const at::Tensor& value) override { return wrap(builder_.constant(value)); }
  OnnxValue ints_constant(const std::vector<std::int64_t>& values) override { return wrap(builder_.ints(values)); }
  OnnxValue scalar(double value, at::ScalarType type) override { return wrap(builder_.scalar(value, type)); }

  void set_output(OnnxValue value, std::size_t i) override {
    if (!value.handle) refuse("its translation set output " + std::to_string(i) + " to no value");
    node_.set_output(value_of(value), i);
  }
  [[noreturn]] void refuse(const std::string& why) const override { node_.refuse(why); }

 private:
  AtenNode& node_;
  OnnxBuilder& builder_;
};

}  // namespace

void run_plugin_translation(const PluginTranslation& translation, AtenNode& node, OnnxBuilder& builder) {
  PluginOnnxOp op(node, builder);
  const std::string from = "the translation " + translation.plugin + " registered failed: ";
  try {
    translation.translate(op);
  } catch (const Untranslatable&) {
    throw;
  } catch (const c10::Error& e) {
    throw Untranslatable{from + e.what_without_backtrace()};
  } catch (const std::exception& e) {
    throw Untranslatable{from + e.what()};
  }
}

}  // namespace mixt
