// The model zoo against torchvision 0.26:
//  - every model: parameter count, and every state_dict name and shape, in order
//    (tests/golden/model_zoo.json, from tests/golden/make_model_zoo_golden.py names);
//  - `mixt list` facts (params, GFLOPs) equal torchvision's published meta;
//  - per family: torchvision's random weights loaded from safetensors give the same logits
//    in eval mode (<= 1e-5 relative) and the same BN running statistics after one
//    train-mode forward (fixtures made at test time by make_model_zoo_golden.py parity).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "mixt/autocast.h"
#include "mixt/helpers/fp32_modules.h"
#include "mixt/helpers/safetensors.h"
#include "mixt/helpers/state_dict.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "expect_error.h"
#include "test_support.h"

namespace mixt {
namespace {

const testing::BuiltPlugins& plugins() {
  static const testing::BuiltPlugins built;
  return built;
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in) << file;
  return nlohmann::json::parse(in);
}

// A model section from YAML (JSON is YAML), built as a recipe would build it.
std::shared_ptr<Model> build(const std::string& yaml, ModelContext context = {}) {
  const Config section(parse_yaml(yaml, "test"), "model");
  return plugins().registry.make_model(section, context);
}

const nlohmann::json& zoo() {
  static const nlohmann::json json =
      read_json(fs::path(testing::configured::source_dir()) / "tests/golden/model_zoo.json");
  return json;
}

class ModelNames : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelNames, CountNamesAndShapesMatchTorchvision) {
  const std::string name = GetParam();
  const nlohmann::json& expected = zoo().at(name);
  at::manual_seed(0);
  const auto model = build("{name: " + name + "}");
  std::int64_t params = 0;
  for (const auto& p : model->parameters()) params += p.numel();
  EXPECT_EQ(params, expected.at("num_params").get<std::int64_t>());

  const NamedTensors state = state_dict(*model);
  const auto& entries = expected.at("state");
  ASSERT_EQ(state.size(), entries.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    ASSERT_EQ(state[i].first, entries[i][0].get<std::string>()) << "entry " << i;
    ASSERT_EQ(state[i].second.sizes().vec(), entries[i][1].get<std::vector<std::int64_t>>()) << state[i].first;
  }
}

TEST_P(ModelNames, ListShowsTorchvisionParamsAndGflops) {
  const std::string name = GetParam();
  const ComponentEntry* entry = plugins().registry.find(ComponentKind::model, name);
  ASSERT_NE(entry, nullptr);
  const nlohmann::json& expected = zoo().at(name);
  std::string digits = std::to_string(expected.at("num_params").get<std::int64_t>()), grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    grouped += std::string(i && (digits.size() - i) % 3 == 0 ? "," : "") + digits[i];
  }
  char gflops[32];
  std::snprintf(gflops, sizeof(gflops), "%.3f GFLOPs", expected.at("gflops").get<double>());
  EXPECT_THAT(entry->info.summary, HasSubstr(grouped + " params"));
  EXPECT_THAT(entry->info.summary, HasSubstr(gflops));
}

std::vector<std::string> zoo_names() {
  std::vector<std::string> names;
  for (const auto& item : zoo().items()) names.push_back(item.key());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Zoo, ModelNames, ::testing::ValuesIn(zoo_names()),
                         [](const auto& info) { return info.param; });

// Every family routes torchvision's top-level children (ViT: its encoder layers too)
// through call_submodule, so `precision.fp32_modules` can keep any of them in float32: under
// bfloat16 autocast the listed head's output is float32 (bfloat16 unlisted), and nothing
// listed goes unrouted (which would fail a run after its first step).
TEST(ModelZoo, EveryFamilyRoutesItsTopLevelChildrenForFp32Modules) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> families = {
      {"resnet18", {"conv1", "bn1", "layer1", "layer2", "layer3", "layer4", "fc"}},
      {"vgg11", {"features", "classifier"}},
      {"mobilenet_v2", {"features", "classifier"}},
      {"mobilenet_v3_small", {"features", "classifier"}},
      {"efficientnet_b0", {"features", "classifier"}},
      {"convnext_tiny", {"features", "classifier"}},
      {"vit_b_32", {"conv_proj", "encoder", "encoder.layers.encoder_layer_0", "encoder.layers.encoder_layer_11",
                    "heads"}},
  };
  for (const auto& [name, children] : families) {
    const std::int64_t size = name.rfind("vit", 0) == 0 ? 224 : 64;
    const std::shared_ptr<Model> model = build("{name: " + name + "}", ModelContext{at::kCPU, {3, size, size}, 10});
    model->eval();
    std::set<std::string> modules;
    for (const auto& item : model->named_modules("", /*include_self=*/false)) modules.insert(item.key());
    for (const std::string& child : children) EXPECT_EQ(modules.count(child), 1u) << name << ": " << child;
    const at::Tensor input = at::randn({1, 3, size, size});
    at::NoGradGuard no_grad;
    {
      AutocastScope bf16(at::kCPU, at::kBFloat16);
      EXPECT_EQ(model->forward(input).scalar_type(), at::kBFloat16) << name;
    }
    set_fp32_modules(*model, children);
    {
      AutocastScope bf16(at::kCPU, at::kBFloat16);
      EXPECT_EQ(model->forward(input).scalar_type(), at::kFloat) << name;
    }
    EXPECT_EQ(unrouted_fp32_modules(*model), std::vector<std::string>{}) << name;
  }
}

TEST(ModelZoo, Resnet50HasTorchvisionsParameterCount) {
  const auto model = build("{name: resnet50}");
  std::int64_t params = 0;
  for (const auto& p : model->parameters()) params += p.numel();
  EXPECT_EQ(params, 25'557'032);
}

TEST(ModelZoo, NumClassesAndZeroInitResidual) {
  const auto model = build("{name: resnet18, num_classes: 7, zero_init_residual: true}");
  for (const auto& [name, t] : state_dict(*model)) {
    if (name == "fc.weight") {
      EXPECT_EQ(t.size(0), 7);
    } else if (name == "layer1.0.bn2.weight") {
      EXPECT_EQ(t.abs().sum().item<double>(), 0.0);
    } else if (name == "layer1.0.bn1.weight") {
      EXPECT_EQ(t.sum().item<double>(), 64.0);
    }
  }
}

TEST(ModelZoo, WrongInputChannelsIsARecipeError) {
  ModelContext grey;
  grey.sample_shape = {1, 28, 28};
  SCOPED_TRACE(::testing::Message() << "accepted 1-channel images");
  const Error e = testing::thrown_error([&] {
    build("{name: resnet18}", grey);
  });
  EXPECT_THAT(e.what(), HasSubstr("3-channel images"));
}

// --- parity with torchvision on the same weights ---------------------------------------

const fs::path kParity = testing::configured::model_parity_dir();

double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  return (got - expected).abs().max().item<double>() / std::max(expected.abs().max().item<double>(), 1e-12);
}

const at::Tensor& find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& item : tensors) {
    if (item.first == name) return item.second;
  }
  throw std::runtime_error("no tensor " + name);
}

class Parity : public ::testing::TestWithParam<std::string> {};

TEST_P(Parity, LogitsAndBatchNormStatisticsMatchTorchvision) {
  const std::string name = GetParam();
  const nlohmann::json cases = read_json(kParity / "cases.json");
  const auto model = build(cases.at(name).dump());
  const NamedTensors io = load_safetensors(kParity / (name + ".io.safetensors")).tensors;
  load_state_dict(*model, load_safetensors(kParity / (name + ".weights.safetensors")).tensors, /*strict=*/true, name);
  const at::Tensor& input = find(io, "input");

  model->eval();
  {
    at::NoGradGuard no_grad;
    const at::Tensor logits = model->forward(input);
    EXPECT_LE(relative_error(logits, find(io, "logits")), 1e-5);
    // channels_last input: same logits.
    const at::Tensor nhwc = model->forward(input.contiguous(at::MemoryFormat::ChannelsLast));
    EXPECT_LE(relative_error(nhwc, find(io, "logits")), 1e-5);
  }

  model->train();
  at::manual_seed(1);  // as the generator: dropout and stochastic depth draw the same masks
  {
    at::NoGradGuard no_grad;
    model->forward(input);
  }
  std::size_t compared = 0;
  for (const auto& [key, value] : state_dict(*model)) {
    if (key.find("running_") == std::string::npos && key.find("num_batches_tracked") == std::string::npos) continue;
    const at::Tensor& expected = find(io, "train." + key);
    if (expected.is_floating_point()) {
      EXPECT_LE(relative_error(value, expected), 1e-5) << key;
    } else {
      EXPECT_TRUE(at::equal(value, expected)) << key;
    }
    ++compared;
  }
  std::size_t expected_count = 0;
  for (const auto& item : io) expected_count += item.first.rfind("train.", 0) == 0;
  EXPECT_EQ(compared, expected_count);
}

INSTANTIATE_TEST_SUITE_P(Families, Parity,
                         ::testing::Values("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large",
                                           "mobilenet_v3_small", "vgg11_bn", "efficientnet_b0", "convnext_tiny",
                                           "vit_small", "lraspp_mobilenet_v3_large", "fcn_resnet50",
                                           "deeplabv3_resnet50"),
                         [](const auto& info) { return info.param; });

// The parity files (~800 MB) are written once per generator and reference versions: the
// fixture leaves a stamp of both, and a second run finds it and writes nothing.
TEST(ModelZooGolden, IsGeneratedOnceForItsGeneratorAndTorchVersions) {
  const std::string script = testing::configured::source_dir() + "/tests/golden/make_model_zoo_golden.py";
  const testing::CommandResult hash = testing::run_command("sha256sum " + testing::shell_quote(script));
  const testing::CommandResult versions = testing::run_command(
      "python3 -c 'import torch, torchvision; print(\"torch\", torch.__version__, \"torchvision\", "
      "torchvision.__version__)'");
  ASSERT_EQ(hash.exit_code, 0) << hash.output;
  ASSERT_EQ(versions.exit_code, 0) << versions.output;
  EXPECT_EQ(testing::read_file(kParity / "stamp"), hash.output.substr(0, 64) + " " + versions.output);

  const auto written = fs::last_write_time(kParity / "resnet18.weights.safetensors");
  const testing::CommandResult again = testing::run_command("python3 " + testing::shell_quote(script) + " parity " +
                                                            testing::shell_quote(kParity.string()));
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("up to date"));
  EXPECT_EQ(fs::last_write_time(kParity / "resnet18.weights.safetensors"), written);
}

}  // namespace
}  // namespace mixt
