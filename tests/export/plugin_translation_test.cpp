// Translations a plugin registers (Registrar::add_onnx_translation, mixt/onnx_translation.h):
// used before the built-in table, named by --list-ops, run in ONNX Runtime like the eager op;
// a second plugin for the same op, a translation that throws and one that refuses are errors
// that name the plugin and the op.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "export/onnx_file.h"
#include "export/onnx_translation.h"
#include "export/op_listing.h"
#include "sdk/plugin_translations.h"
#include "export/traced_model.h"
#include "mixt/error.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/onnx_translation.h"
#include "plugins/registry.h"
#include "test_support.h"

namespace mixt {
namespace {

class Empty : public torch::nn::Module {};

TracedModel traced_tanh(const at::Tensor& sample) {
  static auto model = std::make_shared<Empty>();
  return trace_model(
      *model, [](const at::Tensor& x) { return at::tanh(x * 3.0); }, sample);
}

// tanh(x) = 2 * Sigmoid(2x) - 1: not the table's Tanh, so the file shows whose it is.
void tanh_by_sigmoid(OnnxOp& op) {
  const at::ScalarType type = op.scalar_type(0);
  const OnnxValue doubled = op.add("Mul", {op.tensor(0), op.scalar(2.0, type)});
  const OnnxValue twice = op.add("Mul", {op.add("Sigmoid", {doubled}), op.scalar(2.0, type)});
  op.set_output(op.add("Sub", {twice, op.scalar(1.0, type)}));
}

// Registers `translate` for `op` as plugin `file` would, and drops it again at the end.
class PluginTranslationScope {
 public:
  PluginTranslationScope(Registry& registry, const std::string& file, const std::string& op, OnnxTranslator translate)
      : file_(file) {
    registry.begin_plugin({file, "fixture", "1.0"});
    registry.add_onnx_translation(op, "2*Sigmoid(2x)-1", std::move(translate));
    EXPECT_EQ(registry.end_plugin(), 1u);
  }
  ~PluginTranslationScope() { remove_plugin_translations(file_); }

 private:
  std::string file_;
};

TEST(PluginTranslation, WinsOverTheBuiltInEntryIsListedAndRunsInOnnxRuntime) {
  Registry registry;
  const PluginTranslationScope scope(registry, "/plugins/libmixt_fixture_tanh.so", "aten::tanh", tanh_by_sigmoid);
  const TracedModel traced = traced_tanh(at::randn({2, 5}));
  const std::string listing = describe_traced_ops(traced, 17);
  EXPECT_THAT(listing, HasSubstr("| `aten::tanh` | 1 | 2*Sigmoid(2x)-1 | /plugins/libmixt_fixture_tanh.so |"));
  EXPECT_THAT(listing, HasSubstr("| `aten::mul` | 1 | Mul | built in |"));

  testing::TempDir dir;
  NamedTensors data;
  for (std::int64_t batch : {1, 3}) {
    const at::Tensor x = at::randn({batch, 5});
    data.emplace_back("input_b" + std::to_string(batch), x);
    data.emplace_back("expected_b" + std::to_string(batch), at::tanh(x * 3.0));
  }
  save_safetensors(dir.path() / "data.safetensors", data);
  for (std::int64_t opset : {17, 21}) {
    const OnnxGraph graph = translate_to_onnx(traced, opset);
    std::set<std::string> kinds;
    for (const torch::jit::Node* node : graph.graph->nodes()) kinds.insert(node->kind().toUnqualString());
    EXPECT_EQ(kinds.count("Tanh"), 0u);
    EXPECT_EQ(kinds.count("Sigmoid"), 1u);
    std::ofstream(dir.path() / ("m" + std::to_string(opset) + ".onnx"), std::ios::binary)
        << onnx_file_bytes(graph, opset, {});
  }
  nlohmann::json manifest = nlohmann::json::array();
  for (const char* name : {"m17", "m21"}) {
    manifest.push_back({{"name", name},
                        {"data", (dir.path() / "data.safetensors").string()},
                        {"batches", {1, 3}},
                        {"onnx", (dir.path() / (std::string(name) + ".onnx")).string()}});
  }
  dir.write("manifest.json", manifest.dump());
  const testing::CommandResult result = testing::run_command(
      testing::shell_quote(MIXT_PYTHON) + " " +
      testing::shell_quote((testing::source_dir() / "tests/support/export_reference.py").string()) + " " +
      testing::shell_quote((dir.path() / "manifest.json").string()) + " " +
      testing::shell_quote((dir.path() / "results.json").string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json results = nlohmann::json::parse(testing::read_file(dir.path() / "results.json"));
  for (const char* name : {"m17", "m21"}) {
    EXPECT_EQ(results[name]["checker"], "ok") << name;
    ASSERT_TRUE(results[name]["onnx_max_diff"].is_number()) << results[name];
    EXPECT_LE(results[name]["onnx_max_diff"].get<double>(), 1e-6) << name;
  }
}

TEST(PluginTranslation, ASecondPluginForTheSameOpIsAnErrorNamingBoth) {
  Registry registry;
  const PluginTranslationScope scope(registry, "/plugins/liba.so", "aten::erfinv", tanh_by_sigmoid);
  registry.begin_plugin({"/plugins/libb.so", "b", "1.0"});
  try {
    registry.add_onnx_translation("aten::erfinv", "x", tanh_by_sigmoid);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(),
                HasSubstr("'aten::erfinv' is registered twice: by /plugins/liba.so and by /plugins/libb.so"));
  }
  registry.discard_plugin();
  // The first plugin's stays.
  ASSERT_NE(find_plugin_translation("aten::erfinv"), nullptr);
  EXPECT_EQ(find_plugin_translation("aten::erfinv")->plugin, "/plugins/liba.so");
}

TEST(PluginTranslation, AThrowingOrRefusingTranslationIsAUsageErrorNamingThePluginAndTheOp) {
  Registry registry;
  const TracedModel traced = traced_tanh(at::randn({2, 5}));
  {
    const PluginTranslationScope scope(registry, "/plugins/libthrows.so", "aten::tanh",
                                       [](OnnxOp&) { throw std::runtime_error("no idea how"); });
    try {
      translate_to_onnx(traced, 17);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_THAT(e.message(), HasSubstr("aten::tanh"));
      EXPECT_THAT(e.message(), HasSubstr("the translation /plugins/libthrows.so registered failed: no idea how"));
    }
  }
  {
    const PluginTranslationScope scope(registry, "/plugins/librefuses.so", "aten::tanh", [](OnnxOp& op) {
      op.refuse("tanh of a " + std::to_string(op.rank(0)) + "-D input");
    });
    try {
      translate_to_onnx(traced, 21);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.message(), HasSubstr("aten::tanh"));
      EXPECT_THAT(e.message(), HasSubstr("at opset 21: tanh of a 2-D input"));
    }
  }
  // Without a plugin's, the built-in entry again.
  EXPECT_EQ(find_plugin_translation("aten::tanh"), nullptr);
  EXPECT_NO_THROW(translate_to_onnx(traced, 17));
}

}  // namespace
}  // namespace mixt
