// End to end: `mixt export` of every zoo family (small images and depth; the parity
// fixture's random weights and batch-norm statistics, made by torchvision) to ONNX, TorchScript
// and safetensors, traced at batch 2 and run at batches 1, 3 and 8 against `mixt predict
// --input` (mixt's eager forward): ONNX Runtime and torchvision's model on the safetensors
// within 1e-4 (relative above logits of 1), torch.jit.load equal (one thread each),
// onnx.checker's full check, the ONNX initializers equal to the safetensors tensors by name,
// and the metadata in both files (tests/support/export_reference.py measures). Then float16,
// a trained run's checkpoint, and the refusals: exit 2, the op and the module named, no file
// left behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "export_checks.h"
#include "mixt/helpers/safetensors.h"
#include "test_support.h"

namespace mixt {
namespace {

using testing::CommandResult;
using ::testing::HasSubstr;
using testing::run_mixt;
using testing::TempDir;

const std::vector<std::int64_t> kBatches{1, 3, 8};

// `task`: the recipe's task line, if any ("task: {name: segmentation}").
std::string recipe(const std::string& model, const std::string& shape, std::int64_t classes = 10,
                   const std::string& task = "") {
  return "name: export-check\n" + task + (task.empty() ? "" : "\n") + "model: " + model +
         "\n"
         "data:\n"
         "  val: { name: synthetic, shape: " +
         shape + ", num_classes: " + std::to_string(classes) +
         ", size: 16, batch_size: 8 }\n"
         "trainer: { seed: 0 }\n";
}

// Exports `model` (a recipe's model section) in the three formats, runs mixt predict on
// batches of `sample` and holds the files to the references.
// `second_sample`, when given: another sample shape the files must take (a task that keeps
// the image's height and width open), checked at batches 1 and 3.
void export_and_check(const std::string& model, const std::vector<std::int64_t>& sample,
                      const nlohmann::json& torchvision, std::int64_t classes = 10, const std::string& task = "",
                      const std::vector<std::int64_t>& second_sample = {}) {
  SCOPED_TRACE(model);
  TempDir dir;
  std::string shape = "[";
  for (std::size_t i = 0; i < sample.size(); ++i) shape += (i ? ", " : "") + std::to_string(sample[i]);
  dir.write("r.yaml", recipe(model, shape + "]", classes, task));
  for (const char* file : {"m.onnx", "m.pt", "m.safetensors"}) {
    const CommandResult exported = run_mixt({"export", "r.yaml", "-o", file}, dir.path());
    ASSERT_EQ(exported.exit_code, 0) << file << ":\n" << exported.output;
  }
  const CommandResult opset21 = run_mixt({"export", "r.yaml", "-o", "m21.onnx", "--opset", "21"}, dir.path());
  ASSERT_EQ(opset21.exit_code, 0) << opset21.output;

  NamedTensors data;
  ASSERT_NO_FATAL_FAILURE(testing::predicted_batches(dir.path(), "r.yaml", sample, kBatches, 7, data));
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
  if (!second_sample.empty()) {
    NamedTensors second;
    fs::create_directories(dir.path() / "second");
    ASSERT_NO_FATAL_FAILURE(testing::predicted_batches(dir.path() / "second", (dir.path() / "r.yaml").string(),
                                                       second_sample, {1, 3}, 8, second));
    save_safetensors(dir.path() / "second.safetensors", second);
    nlohmann::json case_at_second_size = full;
    case_at_second_size["name"] = "second_size";
    case_at_second_size["data"] = (dir.path() / "second.safetensors").string();
    case_at_second_size["batches"] = {1, 3};
    manifest.push_back(case_at_second_size);
  }
  dir.write("manifest.json", manifest.dump());
  const nlohmann::json results = testing::run_export_reference(dir.path() / "manifest.json");

  // 1e-4, absolute up to logits of 1 and relative to the largest logit above (ResNet-50's
  // reach 235 with these weights, where float32's own rounding is 1e-5).
  const double tolerance = 1e-4 * std::max(1.0, results.at("opset17").value("expected_max_abs", 1.0));
  for (const char* name : {"opset17", "opset21"}) {
    const nlohmann::json& r = results.at(name);
    ASSERT_NO_FATAL_FAILURE(testing::expect_onnx_within(results, name, tolerance));
    EXPECT_EQ(r["inputs"][0][0], "batch") << name;
    EXPECT_EQ(r["producer"], "mixt") << name;
  }
  const nlohmann::json& r = results.at("opset17");
  // Logits near zero would make every comparison pass: the weights must give real ones.
  EXPECT_GT(r["expected_max_abs"].get<double>(), 0.05);
  EXPECT_EQ(r["opset"][0], 17);
  EXPECT_EQ(results.at("opset21")["opset"][0], 21);
  ASSERT_TRUE(r["torchscript_max_diff"].is_number()) << r["torchscript_max_diff"];
  EXPECT_EQ(r["torchscript_max_diff"].get<double>(), 0.0);
  EXPECT_GT(r["initializers_checked"].get<int>(), 0);
  EXPECT_EQ(r["initializers_mismatched"], nlohmann::json::array());
  if (!torchvision.is_null()) {
    ASSERT_TRUE(r["torchvision_max_diff"].is_number()) << r["torchvision_max_diff"];
    EXPECT_LE(r["torchvision_max_diff"].get<double>(), tolerance);
  }
  if (!second_sample.empty()) {
    const nlohmann::json& second = results.at("second_size");
    EXPECT_EQ(r["inputs"][0], nlohmann::json::array({"batch", sample.at(0), "height", "width"}));
    ASSERT_NO_FATAL_FAILURE(testing::expect_onnx_within(results, "second_size", tolerance));
    EXPECT_GT(second["expected_max_abs"].get<double>(), 0.05);
    EXPECT_EQ(second["torchscript_max_diff"], 0.0);
    if (!torchvision.is_null()) {
      EXPECT_LE(second["torchvision_max_diff"].get<double>(), tolerance);
    }
    std::cout << "[ measured ] " << model << " at a second image size: ONNX Runtime " << second["onnx_max_diff"]
              << ", torch.jit.load " << second["torchscript_max_diff"] << ", torchvision "
              << second.value("torchvision_max_diff", nlohmann::json("-")) << "\n";
  }
  const nlohmann::json& metadata = r["metadata"];
  for (const char* key : {"mixt.version", "mixt.recipe", "mixt.source", "mixt.classes", "mixt.input", "mixt.output",
                          "mixt.preprocessing"}) {
    EXPECT_TRUE(metadata.contains(key)) << key;
  }
  EXPECT_EQ(metadata["mixt.recipe"], "export-check");
  EXPECT_EQ(nlohmann::json::parse(metadata["mixt.input"].get<std::string>())["shape"][0], "batch");
  EXPECT_EQ(r["torchscript_metadata"]["mixt.recipe"], "export-check");
  std::cout << "[ measured ] " << model << ": logits up to " << r["expected_max_abs"] << "; ONNX Runtime "
            << r["onnx_max_diff"] << " (opset 21 " << results.at("opset21")["onnx_max_diff"] << "), torch.jit.load "
            << r["torchscript_max_diff"] << ", torchvision " << r.value("torchvision_max_diff", nlohmann::json("-"))
            << "\n";
}

nlohmann::json vision(const std::string& name, nlohmann::json kwargs = nlohmann::json::object()) {
  kwargs["num_classes"] = 10;
  return {{"model", name}, {"kwargs", kwargs}};
}

// A family with the parity fixture's weights (tests/golden/make_model_zoo_golden.py: random,
// perturbed, random batch-norm statistics) and its input's sample shape.
void export_parity_case(const std::string& name, const nlohmann::json& torchvision, const std::string& task = "",
                        bool second_image_size = false) {
  const fs::path parity = testing::configured::model_parity_dir();
  nlohmann::json section = nlohmann::json::parse(testing::read_file(parity / "cases.json")).at(name);
  section["weights"] = (parity / (name + ".weights.safetensors")).string();
  if (!section.contains("num_classes")) section["num_classes"] = 1000;  // torchvision's default, as the weights have
  const NamedTensors io = load_safetensors(parity / (name + ".io.safetensors")).tensors;
  std::vector<std::int64_t> sample;
  for (const auto& [key, tensor] : io) {
    if (key == "input") sample = tensor.sizes().slice(1).vec();
  }
  // A task of its own checks the output against the data's classes; classification's export does not.
  const std::int64_t classes = task.empty() ? 10 : section["num_classes"].get<std::int64_t>();
  std::vector<std::int64_t> second_sample;
  if (second_image_size) second_sample = {sample.at(0), sample.at(1) * 3 / 4, sample.at(2) * 5 / 4};  // 48x80 at 64x64
  export_and_check(section.dump(), sample, torchvision, classes, task, second_sample);
}

// simple_cnn has no torchvision twin: its own seeded initialisation.
TEST(ExportCli, SimpleCnn) { export_and_check("{name: simple_cnn, num_classes: 10}", {1, 28, 28}, nullptr); }
TEST(ExportCli, Resnet18) { export_parity_case("resnet18", vision("resnet18")); }
TEST(ExportCli, Resnet50) {
  export_parity_case("resnet50", {{"model", "resnet50"}, {"kwargs", nlohmann::json::object()}});
}
TEST(ExportCli, Resnext50) { export_parity_case("resnext50_32x4d", vision("resnext50_32x4d")); }
TEST(ExportCli, MobilenetV2) { export_parity_case("mobilenet_v2", vision("mobilenet_v2")); }
TEST(ExportCli, MobilenetV3Small) { export_parity_case("mobilenet_v3_small", vision("mobilenet_v3_small")); }
TEST(ExportCli, EfficientnetB0) { export_parity_case("efficientnet_b0", vision("efficientnet_b0")); }
TEST(ExportCli, Vgg11Bn) { export_parity_case("vgg11_bn", vision("vgg11_bn")); }
// A segmentation model's parity case under the segmentation task, held to torchvision's model
// built without downloads or the auxiliary head, at the traced image size and another one.
void export_segmentation_case(const std::string& name) {
  export_parity_case(name, {{"model", name}, {"kwargs", {{"num_classes", 4}, {"weights_backbone", nullptr}}}},
                     "task: {name: segmentation}", /*second_image_size=*/true);
}

// A segmentation model: its bilinear upsampling becomes ONNX Resize; logits at every pixel.
TEST(ExportCli, LrasppMobilenetV3Large) { export_segmentation_case("lraspp_mobilenet_v3_large"); }
// The dilated ResNet-50 segmenters: ASPP's pooled branch is upsampled too.
TEST(ExportCli, FcnResnet50) { export_segmentation_case("fcn_resnet50"); }
TEST(ExportCli, Deeplabv3Resnet50) { export_segmentation_case("deeplabv3_resnet50"); }
TEST(ExportCli, ConvnextTiny) { export_parity_case("convnext_tiny", vision("convnext_tiny")); }
TEST(ExportCli, VitB16) {
  export_parity_case("vit_small", {{"model", "VisionTransformer"},
                                   {"kwargs",
                                    {{"image_size", 32},
                                     {"patch_size", 8},
                                     {"num_layers", 2},
                                     {"num_heads", 4},
                                     {"hidden_dim", 64},
                                     {"mlp_dim", 128},
                                     {"num_classes", 10}}}});
}

// --dtype float16: the graph's tensors in float16, run by ONNX Runtime's CPU provider on
// float16 inputs, against mixt's float32 forward (the tolerance is float16's: 11 bits).
TEST(ExportCli, Float16OnnxRunsInOnnxRuntimeNearTheFloat32Model) {
  TempDir dir;
  const fs::path parity = testing::configured::model_parity_dir();
  const std::string model =
      "{name: resnet18, num_classes: 10, weights: " + (parity / "resnet18.weights.safetensors").string() + "}";
  dir.write("r.yaml", recipe(model, "[3, 64, 64]"));
  const CommandResult exported = run_mixt({"export", "r.yaml", "-o", "m16.onnx", "--dtype", "float16"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_THAT(exported.output, HasSubstr("float16"));
  const CommandResult torchscript = run_mixt({"export", "r.yaml", "-o", "m.pt", "--dtype", "float16"}, dir.path());
  EXPECT_EQ(torchscript.exit_code, 2) << torchscript.output;
  EXPECT_THAT(torchscript.output, HasSubstr("--dtype float16 goes with --format onnx"));
  at::manual_seed(5);
  const at::Tensor x = at::randn({3, 3, 64, 64});
  save_safetensors(dir.path() / "in.safetensors", {{"input", x}});
  const CommandResult predicted =
      run_mixt({"predict", "r.yaml", "--input", "in.safetensors", "--output", "out.safetensors"}, dir.path());
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  save_safetensors(
      dir.path() / "data.safetensors",
      {{"input_b3", x}, {"expected_b3", load_safetensors(dir.path() / "out.safetensors").tensors.at(0).second}});
  dir.write("manifest.json", nlohmann::json::array({{{"name", "half"},
                                                     {"data", (dir.path() / "data.safetensors").string()},
                                                     {"batches", {3}},
                                                     {"onnx", (dir.path() / "m16.onnx").string()}}})
                                 .dump());
  const nlohmann::json r = testing::run_export_reference(dir.path() / "manifest.json").at("half");
  ASSERT_FALSE(r.contains("error")) << r["error"];
  EXPECT_EQ(r["checker"], "ok");
  EXPECT_EQ(r["input_dtype"], "float16");
  EXPECT_EQ(nlohmann::json::parse(r["metadata"]["mixt.input"].get<std::string>())["dtype"], "float16");
  ASSERT_TRUE(r["onnx_max_diff"].is_number()) << r["onnx_max_diff"];
  EXPECT_LE(r["onnx_max_diff"].get<double>(), 2e-2 * std::max(1.0, r["expected_max_abs"].get<double>()));
  std::cout << "[ measured ] resnet18 float16 ONNX in ONNX Runtime (CPU) vs mixt float32: " << r["onnx_max_diff"]
            << " (logits up to " << r["expected_max_abs"] << ")\n";
}

// A trained run: its checkpoint exported to ONNX and TorchScript computes what `mixt predict
// RUN` computes, and the files carry the run's class names.
TEST(ExportCli, ARunsCheckpointExportsWithItsClassNames) {
  TempDir dir;
  dir.write("tiny.yaml", testing::kTinyRecipe);
  const CommandResult run =
      run_mixt({"run", "tiny.yaml", "data.train.limit=256", "data.val=null", "trainer.epochs=1"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  fs::path run_dir;
  for (const auto& entry : fs::directory_iterator(dir.path() / "runs" / "tiny")) run_dir = entry.path();
  for (const char* file : {"m.onnx", "m.pt", "m.safetensors"}) {
    const CommandResult exported = run_mixt({"export", run_dir.string(), "-o", file}, dir.path());
    ASSERT_EQ(exported.exit_code, 0) << file << ":\n" << exported.output;
  }
  NamedTensors data;
  ASSERT_NO_FATAL_FAILURE(testing::predicted_batches(dir.path(), run_dir.string(), {1, 28, 28}, {1, 3}, 3, data));
  save_safetensors(dir.path() / "data.safetensors", data);
  const nlohmann::json manifest = nlohmann::json::array({{{"name", "run"},
                                                          {"data", (dir.path() / "data.safetensors").string()},
                                                          {"batches", {1, 3}},
                                                          {"onnx", (dir.path() / "m.onnx").string()},
                                                          {"torchscript", (dir.path() / "m.pt").string()},
                                                          {"safetensors", (dir.path() / "m.safetensors").string()}}});
  dir.write("manifest.json", manifest.dump());
  const nlohmann::json r = testing::run_export_reference(dir.path() / "manifest.json").at("run");
  ASSERT_FALSE(r.contains("error")) << r["error"];
  EXPECT_EQ(r["checker"], "ok");
  EXPECT_LE(r["onnx_max_diff"].get<double>(), 1e-4);
  EXPECT_EQ(r["torchscript_max_diff"].get<double>(), 0.0);
  EXPECT_EQ(r["initializers_mismatched"], nlohmann::json::array());
  const nlohmann::json classes = nlohmann::json::parse(r["metadata"]["mixt.classes"].get<std::string>());
  ASSERT_EQ(classes.size(), 10u);
  EXPECT_EQ(classes[0], "T-shirt/top");
  EXPECT_EQ(r["torchscript_metadata"]["mixt.classes"], classes);
  EXPECT_THAT(r["metadata"]["mixt.source"].get<std::string>(), HasSubstr("checkpoints"));
}

std::string fixture_recipe(const std::string& model) {
  return "name: unexportable\n"
         "plugins: [" +
         testing::configured::fixture_plugin_dir() + "/libmixt_fixture_unexportable_models.so]\n" +
         "model: { name: " + model +
         " }\n"
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

// --list-ops: the ops of the trace, each with its translation or none, and whether the whole
// graph translates; nothing written, and -o with it is a usage error.
TEST(ExportCli, ListOpsNamesEachOpsTranslationAndWritesNothing) {
  TempDir dir;
  dir.write("bad.yaml", fixture_recipe("fixture_untranslatable_op"));
  const CommandResult refused = run_mixt({"export", "bad.yaml", "--list-ops"}, dir.path());
  EXPECT_EQ(refused.exit_code, 0) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("| `aten::erfinv` | 1 | no entry: refused |  | head |"));
  EXPECT_THAT(refused.output, HasSubstr("1 without a translation"));
  EXPECT_THAT(refused.output, HasSubstr("at opset 17: refused: cannot export to ONNX: aten::erfinv in module 'head'"));
  dir.write("good.yaml", recipe("{name: simple_cnn, num_classes: 10}", "[1, 28, 28]"));
  const CommandResult good = run_mixt({"export", "good.yaml", "--list-ops", "--opset", "21"}, dir.path());
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_THAT(good.output, HasSubstr("| `aten::_convolution` | "));
  EXPECT_THAT(good.output, HasSubstr(" | Conv, or ConvTranspose (transposed) | built in | "));
  EXPECT_THAT(good.output, HasSubstr("0 without a translation"));
  EXPECT_THAT(good.output, HasSubstr("at opset 21: every op translates"));
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) files += entry.path().extension() != ".yaml";
  EXPECT_EQ(files, 0u);
  const CommandResult both = run_mixt({"export", "good.yaml", "--list-ops", "-o", "m.onnx"}, dir.path());
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_THAT(both.output, HasSubstr("--list-ops writes nothing"));
  const CommandResult neither = run_mixt({"export", "good.yaml"}, dir.path());
  EXPECT_EQ(neither.exit_code, 2) << neither.output;
  EXPECT_THAT(neither.output, HasSubstr("mixt export needs -o FILE"));
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
