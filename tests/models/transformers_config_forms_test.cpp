// Published config.json forms read as transformers reads them (issue: Llama-2's file has no
// rope_theta, llama-7b's no num_key_value_heads, and a preset's values stood in):
//  - every form builds, under every preset of its family, options equal one by one to
//    transformers' config object from the same dict (AutoConfig.for_model);
//  - each form shrunk to a test's sizes (the same keys absent) gives transformers' logits,
//    <= 1e-5 relative, under every preset of its family;
//  - a config.json value of the wrong type or out of range is a recipe error naming its key.
// References: tests/golden/make_config_forms_golden.py, run by the ctest fixture
// config_forms_golden.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "assembly/components.h"
#include "assembly/transformers_dir.h"
#include "expect_error.h"
#include "mixt/helpers/safetensors.h"
#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "recipe/recipe_node.h"
#include "test_support.h"

namespace mixt {
namespace {

using ::testing::HasSubstr;

const fs::path kForms = fs::path(testing::configured::binary_dir()) / "tests" / "config_forms";
constexpr double kTolerance = 1e-5;

const std::vector<std::string> kFormNames = {"llama_2_7b",   "llama_7b",     "tinyllama_1_1b",   "smollm2_135m",
                                             "smollm2_360m", "llama_3_2_1b", "llama_sizes_only", "gpt2",
                                             "gpt2_medium",  "gpt2_vocab_only"};

const std::map<std::string, std::vector<std::string>> kPresets = {
    {"llama", {"llama", "smollm2_135m", "tinyllama_1_1b", "llama3_2_1b"}},
    {"gpt2", {"gpt2", "gpt2_medium", "gpt2_large", "gpt2_xl"}}};

const testing::BuiltPlugins& plugins() {
  static const testing::BuiltPlugins built;
  return built;
}

nlohmann::json read_json(const fs::path& file) { return nlohmann::json::parse(testing::read_file(file)); }

std::string section_yaml(const std::string& preset, const fs::path& folder) {
  return "{name: " + preset + ", from: '" + folder.string() + "'}";
}

// The model section's options after model.from's config.json (no weights read).
std::map<std::string, std::string> options_from(const std::string& preset, const fs::path& folder) {
  const Config section(parse_yaml(section_yaml(preset, folder), "test"), "model");
  apply_transformers_config(section, plugins().registry.find(ComponentKind::model, section));
  std::map<std::string, std::string> options;
  for (const RecipeEntry& entry : ConfigTree::node(section).entries) options[entry.key] = entry.value->scalar;
  return options;
}

// transformers' value against the recipe text mixt filled in.
void expect_same(const std::string& option, const nlohmann::json& expected, const std::string& got) {
  if (expected.is_number()) {
    EXPECT_DOUBLE_EQ(std::stod(got), expected.get<double>()) << option;
  } else if (expected.is_boolean()) {
    EXPECT_EQ(got, expected.get<bool>() ? "true" : "false") << option;
  } else {
    EXPECT_EQ(got, expected.get<std::string>()) << option;
  }
}

class PublishedConfigForm : public ::testing::TestWithParam<std::string> {
 protected:
  std::string family() const { return read_json(kForms / "forms.json").at(GetParam()).get<std::string>(); }
};

TEST_P(PublishedConfigForm, EveryPresetTakesTransformersOptionsOneByOne) {
  const nlohmann::json expected = read_json(kForms / (GetParam() + ".options.json"));
  for (const std::string& preset : kPresets.at(family())) {
    SCOPED_TRACE(preset);
    const auto options = options_from(preset, kForms / GetParam());
    for (const auto& [option, value] : expected.items()) {
      const auto found = options.find(option);
      if (found != options.end()) {
        expect_same(option, value, found->second);
        continue;
      }
      // Left to the model, whose documented default for these is transformers' rule.
      const double hidden = std::stod(options.at("hidden_dim"));
      if (option == "head_dim") {
        EXPECT_EQ(hidden / std::stod(options.at("num_heads")), value.get<double>());
      } else if (option == "mlp_dim" && family() == "gpt2") {
        EXPECT_EQ(4 * hidden, value.get<double>());
      } else {
        ADD_FAILURE() << option << " is not filled from " << GetParam() << "'s config.json";
      }
    }
  }
}

TEST_P(PublishedConfigForm, ShrunkItGivesTransformersLogitsUnderEveryPreset) {
  const std::string small = GetParam() + "_small";
  const NamedTensors io = load_safetensors(kForms / (small + ".io.safetensors")).tensors;
  for (const std::string& preset : kPresets.at(family())) {
    SCOPED_TRACE(preset);
    const Config section(parse_yaml(section_yaml(preset, kForms / small), "test"), "model");
    const auto model = build_model(section, plugins().registry, ModelContext{});
    model->eval();
    at::NoGradGuard no_grad;
    for (int n = 0;; ++n) {
      const auto ids =
          std::find_if(io.begin(), io.end(), [&](const auto& t) { return t.first == "ids_" + std::to_string(n); });
      if (ids == io.end()) break;
      const auto logits =
          std::find_if(io.begin(), io.end(), [&](const auto& t) { return t.first == "logits_" + std::to_string(n); });
      const at::Tensor got = model->forward(ids->second);
      ASSERT_EQ(got.sizes(), logits->second.sizes()) << n;
      const double error =
          (got - logits->second).abs().max().item<double>() / logits->second.abs().max().item<double>();
      EXPECT_LE(error, kTolerance) << "ids_" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, PublishedConfigForm, ::testing::ValuesIn(kFormNames));

// forms.json, which the fixture wrote, lists exactly these forms: one added there is tested.
TEST(PublishedConfigForms, TheTestCoversEveryFormOfTheReference) {
  const nlohmann::json forms = read_json(kForms / "forms.json");
  std::vector<std::string> listed;
  for (const auto& item : forms.items()) listed.push_back(item.key());
  std::vector<std::string> tested = kFormNames;
  std::sort(listed.begin(), listed.end());
  std::sort(tested.begin(), tested.end());
  EXPECT_EQ(listed, tested);
}

// A value of the wrong type or out of range: a recipe error naming config.json's key, before
// the model (or its embedding) is built.
TEST(PublishedConfigForms, ABadValueIsARecipeErrorNamingTheKey) {
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"num_attention_heads", -4, "num_attention_heads"},
      {"vocab_size", 1e12, "vocab_size"},
      {"hidden_size", "wide", "hidden_size"},
      {"rms_norm_eps", "small", "rms_norm_eps"},
      {"tie_word_embeddings", 3, "tie_word_embeddings"}};
  for (const auto& [key, value, named] : cases) {
    SCOPED_TRACE(key);
    TempDir dir;
    fs::create_directories(dir.path() / "ckpt");
    nlohmann::json config = read_json(kForms / "llama_2_7b_small" / "config.json");
    config[key] = value;
    dir.write("ckpt/config.json", config.dump());
    fs::copy_file(kForms / "llama_2_7b_small" / "model.safetensors", dir.path() / "ckpt" / "model.safetensors");
    const Config section(parse_yaml(section_yaml("llama", dir.path() / "ckpt"), "test"), "model");
    const Error error = testing::thrown_error([&] { build_model(section, plugins().registry, ModelContext{}); });
    EXPECT_EQ(error.kind(), ErrorKind::recipe);
    EXPECT_THAT(error.what(), HasSubstr(named));
  }
}

// A recipe value that disagrees with a default transformers takes is refused as one that
// disagrees with the file; one that agrees is taken.
TEST(PublishedConfigForms, ARecipeValueMustAgreeWithTheDefaultTransformersTakes) {
  const fs::path folder = kForms / "llama_2_7b";
  const Config wrong(parse_yaml("{name: llama, rope_theta: 100000.0, from: '" + folder.string() + "'}", "test"),
                     "model");
  const Error error = testing::thrown_error(
      [&] { apply_transformers_config(wrong, plugins().registry.find(ComponentKind::model, wrong)); });
  EXPECT_THAT(error.what(), HasSubstr("LlamaConfig's default for rope_theta"));
  const Config agreeing(parse_yaml("{name: llama, rope_theta: 10000.0, from: '" + folder.string() + "'}", "test"),
                        "model");
  EXPECT_NO_THROW(apply_transformers_config(agreeing, plugins().registry.find(ComponentKind::model, agreeing)));
}

// Found by fuzzing (fuzz/regressions/transformers_config): a weight_map naming a shard by
// anything but a string threw nlohmann's type_error, which no caller catches.
TEST(PublishedConfigForms, AShardIndexNamingAShardByANumberIsARecipeError) {
  testing::TempDir dir;
  dir.write("config.json", R"({"model_type": "llama"})");
  dir.write("model.safetensors.index.json", R"({"weight_map": {"lm_head.weight": 1}})");
  const Config section(parse_yaml(section_yaml("llama", dir.path()), "test"), "model");
  const Error error = testing::thrown_error(
      [&] { apply_transformers_dir(section, plugins().registry.find(ComponentKind::model, section)); });
  EXPECT_THAT(error.what(), HasSubstr("model.safetensors.index.json maps lm_head.weight to 1, not a file"));
}

// Found by the jsonl fuzz target in the instruct reader, and true here too: a number beyond a
// double's range is nlohmann's out_of_range, not a parse_error, and escaped model.from.
TEST(PublishedConfigForms, AConfigNumberBeyondADoublesRangeIsARecipeError) {
  testing::TempDir dir;
  dir.write("config.json", R"({"model_type": "llama", "rope_theta": 1e400})");
  const Config section(parse_yaml(section_yaml("llama", dir.path()), "test"), "model");
  const Error error = testing::thrown_error(
      [&] { apply_transformers_config(section, plugins().registry.find(ComponentKind::model, section)); });
  EXPECT_THAT(error.what(), HasSubstr("config.json is not valid JSON"));
  EXPECT_THAT(error.what(), HasSubstr("1e400"));
}

}  // namespace
}  // namespace mixt
