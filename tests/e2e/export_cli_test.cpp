// End to end: `mixt export` of every zoo family (small images and depth, seeded weights from
// the recipe) to ONNX, TorchScript and safetensors, traced at batch 2 and run at batches 1, 3
// and 8 against `mixt predict --input` (mixt's eager forward): ONNX Runtime and torchvision's
// model on the safetensors within 1e-4, torch.jit.load within 1e-5, onnx.checker's full
// check, the ONNX initializers equal to the safetensors tensors by name, and the metadata in
// both files (tests/support/export_reference.py measures). Then the refusals: exit 2, the op
// and the module named, no file left behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mixt/helpers/safetensors.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::run_mixt;
using testing::TempDir;

const std::vector<std::int64_t> kBatches{1, 3, 8};

std::string recipe(const std::string& model, const std::string& shape) {
  return "name: export-check\n"
         "model: " + model + "\n"
         "data:\n"
         "  val: { name: synthetic, shape: " + shape + ", num_classes: 10, size: 16, batch_size: 8 }\n"
         "trainer: { seed: 0 }\n";
}

nlohmann::json run_reference(const fs::path& manifest) {
  const fs::path results = manifest.parent_path() / "results.json";
  const CommandResult result = testing::run_command(
      testing::shell_quote(MIXT_PYTHON) + " " +
      testing::shell_quote((testing::source_dir() / "tests/support/export_reference.py").string()) + " " +
      testing::shell_quote(manifest.string()) + " " + testing::shell_quote(results.string()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return nlohmann::json::parse(testing::read_file(results));
}

// Exports `model` (a recipe's model section) in the three formats, runs mixt predict on
// batches of `sample` and holds the files to the references.
void export_and_check(const std::string& model, const std::vector<std::int64_t>& sample,
                      const nlohmann::json& torchvision) {
  TempDir dir;
  std::string shape = "[";
  for (std::size_t i = 0; i < sample.size(); ++i) shape += (i ? ", " : "") + std::to_string(sample[i]);
  dir.write("r.yaml", recipe(model, shape + "]"));
  for (const char* file : {"m.onnx", "m.pt", "m.safetensors"}) {
    const CommandResult exported = run_mixt({"export", "r.yaml", "-o", file}, dir.path());
    ASSERT_EQ(exported.exit_code, 0) << file << ":\n" << exported.output;
  }
  const CommandResult opset21 = run_mixt({"export", "r.yaml", "-o", "m21.onnx", "--opset", "21"}, dir.path());
  ASSERT_EQ(opset21.exit_code, 0) << opset21.output;

  NamedTensors data;
  at::manual_seed(7);
  for (std::int64_t batch : kBatches) {
    std::vector<std::int64_t> batch_shape{batch};
    batch_shape.insert(batch_shape.end(), sample.begin(), sample.end());
    const at::Tensor x = at::randn(batch_shape);
    const std::string b = std::to_string(batch);
    save_safetensors(dir.path() / ("in" + b + ".safetensors"), {{"input", x}});
    const CommandResult predicted = run_mixt(
        {"predict", "r.yaml", "--input", "in" + b + ".safetensors", "--output", "out" + b + ".safetensors"}, dir.path());
    ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
    data.emplace_back("input_b" + b, x);
    data.emplace_back("expected_b" + b, load_safetensors(dir.path() / ("out" + b + ".safetensors")).tensors.at(0).second);
  }
  save_safetensors(dir.path() / "data.safetensors", data);
  nlohmann::json manifest = nlohmann::json::array();
  nlohmann::json full = {{"name", "opset17"},
                         {"data", (dir.path() / "data.safetensors").string()},
                         {"batches", kBatches},
                         {"onnx", (dir.path() / "m.onnx").string()},
                         {"torchscript", (dir.path() / "m.pt").string()},
                         {"safetensors", (dir.path() / "m.safetensors").string()}};
  if (!torchvision.is_null()) full["torchvision"] = torchvision;
  manifest.push_back(full);
  manifest.push_back({{"name", "opset21"},
                      {"data", (dir.path() / "data.safetensors").string()},
                      {"batches", kBatches},
                      {"onnx", (dir.path() / "m21.onnx").string()}});
  dir.write("manifest.json", manifest.dump());
  const nlohmann::json results = run_reference(dir.path() / "manifest.json");

  for (const char* name : {"opset17", "opset21"}) {
    const nlohmann::json& r = results.at(name);
    ASSERT_FALSE(r.contains("error")) << name << ": " << r["error"];
    EXPECT_EQ(r["checker"], "ok") << name;
    ASSERT_TRUE(r["onnx_max_diff"].is_number()) << name << ": " << r["onnx_max_diff"];
    EXPECT_LE(r["onnx_max_diff"].get<double>(), 1e-4) << name;
    EXPECT_EQ(r["inputs"][0][0], "batch") << name;
    EXPECT_EQ(r["producer"], "mixt") << name;
  }
  const nlohmann::json& r = results.at("opset17");
  EXPECT_EQ(r["opset"][0], 17);
  EXPECT_EQ(results.at("opset21")["opset"][0], 21);
  ASSERT_TRUE(r["torchscript_max_diff"].is_number()) << r["torchscript_max_diff"];
  EXPECT_LE(r["torchscript_max_diff"].get<double>(), 1e-5);
  EXPECT_GT(r["initializers_checked"].get<int>(), 0);
  EXPECT_EQ(r["initializers_mismatched"], nlohmann::json::array());
  if (!torchvision.is_null()) {
    ASSERT_TRUE(r["torchvision_max_diff"].is_number()) << r["torchvision_max_diff"];
    EXPECT_LE(r["torchvision_max_diff"].get<double>(), 1e-4);
  }
  const nlohmann::json& metadata = r["metadata"];
  for (const char* key : {"mixt.version", "mixt.recipe", "mixt.source", "mixt.classes", "mixt.input", "mixt.output",
                          "mixt.preprocessing"}) {
    EXPECT_TRUE(metadata.contains(key)) << key;
  }
  EXPECT_EQ(metadata["mixt.recipe"], "export-check");
  EXPECT_EQ(nlohmann::json::parse(metadata["mixt.input"].get<std::string>())["shape"][0], "batch");
  EXPECT_EQ(r["torchscript_metadata"]["mixt.recipe"], "export-check");
  std::cout << "[ measured ] " << model << ": ONNX Runtime " << r["onnx_max_diff"] << " (opset 21 "
            << results.at("opset21")["onnx_max_diff"] << "), torch.jit.load " << r["torchscript_max_diff"]
            << ", torchvision " << r.value("torchvision_max_diff", nlohmann::json("-")) << "\n";
}

nlohmann::json vision(const std::string& name, nlohmann::json kwargs = nlohmann::json::object()) {
  kwargs["num_classes"] = 10;
  return {{"model", name}, {"kwargs", kwargs}};
}

TEST(ExportCli, SimpleCnn) { export_and_check("{name: simple_cnn, num_classes: 10}", {1, 28, 28}, nullptr); }
TEST(ExportCli, Resnet18) { export_and_check("{name: resnet18, num_classes: 10}", {3, 32, 32}, vision("resnet18")); }
TEST(ExportCli, Resnet50) { export_and_check("{name: resnet50, num_classes: 10}", {3, 32, 32}, vision("resnet50")); }
TEST(ExportCli, Resnext50) {
  export_and_check("{name: resnext50_32x4d, num_classes: 10}", {3, 32, 32}, vision("resnext50_32x4d"));
}
TEST(ExportCli, MobilenetV2) {
  export_and_check("{name: mobilenet_v2, num_classes: 10}", {3, 32, 32}, vision("mobilenet_v2"));
}
TEST(ExportCli, MobilenetV3Small) {
  export_and_check("{name: mobilenet_v3_small, num_classes: 10}", {3, 32, 32}, vision("mobilenet_v3_small"));
}
TEST(ExportCli, EfficientnetB0) {
  export_and_check("{name: efficientnet_b0, num_classes: 10}", {3, 32, 32}, vision("efficientnet_b0"));
}
TEST(ExportCli, Vgg11Bn) { export_and_check("{name: vgg11_bn, num_classes: 10}", {3, 32, 32}, vision("vgg11_bn")); }
TEST(ExportCli, ConvnextTiny) {
  export_and_check("{name: convnext_tiny, num_classes: 10}", {3, 32, 32}, vision("convnext_tiny"));
}
TEST(ExportCli, VitB16) {
  export_and_check(
      "{name: vit_b_16, num_classes: 10, image_size: 32, patch_size: 16, num_layers: 2, num_heads: 4, hidden_dim: 64, "
      "mlp_dim: 128}",
      {3, 32, 32},
      {{"model", "VisionTransformer"},
       {"kwargs",
        {{"image_size", 32}, {"patch_size", 16}, {"num_layers", 2}, {"num_heads", 4}, {"hidden_dim", 64},
         {"mlp_dim", 128}, {"num_classes", 10}}}});
}

std::string fixture_recipe(const std::string& model) {
  return "name: unexportable\n"
         "plugins: [" + std::string(MIXT_FIXTURE_PLUGIN_DIR) + "/libmixt_fixture_unexportable_models.so]\n" +
         "model: { name: " + model + " }\n"
         "data:\n"
         "  val: { name: synthetic, shape: [4, 3], num_classes: 5, size: 8, batch_size: 4 }\n";
}

TEST(ExportCli, AnOpOutsideTheTableIsRefusedWithItsModuleAndNoFile) {
  TempDir dir;
  dir.write("r.yaml", fixture_recipe("fixture_untranslatable_op"));
  const CommandResult onnx = run_mixt({"export", "r.yaml", "-o", "m.onnx"}, dir.path());
  EXPECT_EQ(onnx.exit_code, 2) << onnx.output;
  EXPECT_THAT(onnx.output, HasSubstr("mixt: error: cannot export to ONNX: aten::erfinv in module 'head' at opset 17"));
  EXPECT_THAT(onnx.output, HasSubstr("hint: export --format torchscript"));
  EXPECT_FALSE(fs::exists(dir.path() / "m.onnx"));
  EXPECT_FALSE(fs::exists(dir.path() / "m.onnx.tmp"));
  const CommandResult opset = run_mixt({"export", "r.yaml", "-o", "m.onnx", "--opset", "21"}, dir.path());
  EXPECT_THAT(opset.output, HasSubstr("at opset 21"));
  // TorchScript needs no table.
  const CommandResult torchscript = run_mixt({"export", "r.yaml", "-o", "m.pt"}, dir.path());
  EXPECT_EQ(torchscript.exit_code, 0) << torchscript.output;
  EXPECT_TRUE(fs::exists(dir.path() / "m.pt"));
}

TEST(ExportCli, AForwardThatFreezesTheBatchIsRefusedInBothFormats) {
  TempDir dir;
  dir.write("r.yaml", fixture_recipe("fixture_frozen_batch"));
  for (const char* file : {"m.onnx", "m.pt"}) {
    const CommandResult result = run_mixt({"export", "r.yaml", "-o", file}, dir.path());
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output, HasSubstr("at batch 1 (traced at 2)")) << file;
    EXPECT_THAT(result.output, HasSubstr("x.flatten(1)")) << file;
    EXPECT_FALSE(fs::exists(dir.path() / file));
  }
}

TEST(ExportCli, UsageErrors) {
  TempDir dir;
  dir.write("r.yaml", recipe("{name: simple_cnn, num_classes: 10}", "[1, 28, 28]"));
  const CommandResult opset = run_mixt({"export", "r.yaml", "-o", "m.onnx", "--opset", "16"}, dir.path());
  EXPECT_EQ(opset.exit_code, 2);
  EXPECT_THAT(opset.output, HasSubstr("--opset 16: mixt writes ONNX opsets 17 to 21"));
  const CommandResult format = run_mixt({"export", "r.yaml", "-o", "m.bin", "--format", "tflite"}, dir.path());
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_THAT(format.output, HasSubstr("unknown export format 'tflite'"));
  EXPECT_FALSE(fs::exists(dir.path() / "m.onnx"));
}

}  // namespace
}  // namespace mixt
