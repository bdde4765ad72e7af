// `mixt diagnose`: on a fixture model whose middle block overflows float16 on purpose
// (tests/fixtures/plugins/overflowing_model.cpp), it names the block, finds the
// fp32_modules that make the same steps healthy, and a run with them is healthy. Under a
// float8 policy, on a fixture model whose one float8 layer sees a few huge outliers
// (tests/fixtures/plugins/float8_outliers.cpp), it names that layer and only it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <set>

#include "test_support.h"

namespace mixt {
namespace {

const std::string kRecipe = "plugins: [" + testing::configured::fixture_plugin_dir() +
                            "/libmixt_fixture_overflowing_model.so]\n" +
                            "model: {name: fixture_overflows_in_float16}\n"
                            "precision: {name: amp_fp16}\n"
                            "optimizer: {name: sgd, lr: 0.01}\n"
                            "data: {train: {name: synthetic, shape: [8], num_classes: 4, size: 256, batch_size: 32}}\n"
                            "trainer: {device: cpu, epochs: 1, log_every: 1000}\n";

// stdout alone (run_command captures stderr with it): the JSON.
nlohmann::json json_report(const TempDir& dir, const std::vector<std::string>& args, int* exit_code) {
  std::string command = "cd " + testing::shell_quote(dir.path().string()) + " && " +
                        testing::shell_quote(testing::configured::mixt_executable());
  for (const auto& arg : args) command += " " + testing::shell_quote(arg);
  const CommandResult result = testing::run_command("sh -c " + testing::shell_quote(command + " 2>/dev/null"));
  *exit_code = result.exit_code;
  return nlohmann::json::parse(result.output);
}

TEST(DiagnoseCli, NamesTheOverflowingBlockAndAFixThatMakesTheRunHealthy) {
  TempDir dir;
  dir.write("r.yaml", kRecipe);
  // As written: every step's forward pass overflows in "amplify"; the run ends done, and
  // says so, naming mixt diagnose.
  const CommandResult plain = run_mixt({"run", "r.yaml", "trainer.max_steps_per_epoch=6", "output=runs"}, dir.path());
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_THAT(plain.output, HasSubstr("skipped every step of epoch 1"));
  EXPECT_THAT(plain.output, HasSubstr("mixt diagnose"));

  const CommandResult report = run_mixt({"diagnose", "r.yaml", "--steps", "6"}, dir.path());
  ASSERT_EQ(report.exit_code, 0) << report.output;
  EXPECT_THAT(report.output, HasSubstr("first inf/NaN  output of amplify at step 1"));
  EXPECT_THAT(report.output, HasSubstr("skipped steps  6 of 6"));
  EXPECT_THAT(report.output, HasSubstr("fix: add to the recipe\n  precision.fp32_modules: [amplify]"))
      << report.output;
  EXPECT_THAT(report.output, HasSubstr("mixt diagnose: trial 1/8: precision.fp32_modules: [amplify] ..."))
      << report.output;

  // The fix, applied: no step skipped but the loss scale's first calibration.
  const CommandResult fixed = run_mixt(
      {"run", "r.yaml", "trainer.max_steps_per_epoch=6", "precision.fp32_modules=[amplify]", "output=runs"}, dir.path());
  ASSERT_EQ(fixed.exit_code, 0) << fixed.output;
  std::smatch skipped;
  ASSERT_TRUE(std::regex_search(fixed.output, skipped, std::regex(R"(\(([0-9]+) skipped\))"))) << fixed.output;
  EXPECT_LE(std::stoi(skipped[1]), 1) << fixed.output;
  EXPECT_EQ(fixed.output.find("skipped"), fixed.output.find("skipped_steps 0")) << fixed.output;
  EXPECT_THAT(fixed.output, Not(HasSubstr("mixt diagnose")));
}

TEST(DiagnoseCli, TheJsonReportHoldsModulesParametersTrialsAndTheFix) {
  TempDir dir;
  dir.write("r.yaml", kRecipe);
  int exit_code = -1;
  const nlohmann::json report = json_report(dir, {"diagnose", "r.yaml", "--steps", "4", "--json"}, &exit_code);
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(report["exit_code"], 0);
  EXPECT_EQ(report["policy"], "amp_fp16");
  EXPECT_EQ(report["steps"].size(), 4u);
  EXPECT_EQ(report["skipped"], 4);
  std::vector<std::string> modules;
  for (const auto& m : report["modules"]) modules.push_back(m["name"]);
  EXPECT_EQ(modules, (std::vector<std::string>{"body", "amplify", "head"}));
  EXPECT_EQ(report["modules"][0]["nonfinite"], 0);
  EXPECT_GT(report["modules"][1]["nonfinite"].get<std::int64_t>(), 0);
  EXPECT_EQ(report["first_nonfinite"]["module"], "amplify");
  EXPECT_EQ(report["parameters"].size(), 6u);  // three blocks' weights and biases
  EXPECT_EQ(report["healthy"], false);
  ASSERT_FALSE(report["fix"].is_null()) << report.dump(2);
  EXPECT_EQ(report["fix"]["fp32_modules"], (std::vector<std::string>{"amplify"}));
  EXPECT_EQ(report["fix"]["recipe_line"], "precision.fp32_modules: [amplify]");
  ASSERT_EQ(report["trials"].size(), 1u);
  EXPECT_EQ(report["trials"][0]["healthy"], true);
  // The loss scale backed off once a step from 2^16.
  EXPECT_EQ(report["steps"][3]["loss_scale"], 65536.0 / 8);
}

// Two blocks overflow: no single module fixes the run, and the search narrows "every
// module whose outputs left float16's range" (both blocks and head, which gets their inf)
// down to the two.
TEST(DiagnoseCli, ATwoModuleFixIsFoundBySearch) {
  TempDir dir;
  dir.write("r.yaml", kRecipe);
  int exit_code = -1;
  const nlohmann::json report =
      json_report(dir, {"diagnose", "r.yaml", "--steps", "4", "--json", "model.overflowing_blocks=2"}, &exit_code);
  EXPECT_EQ(exit_code, 0);
  ASSERT_FALSE(report["fix"].is_null()) << report.dump(2);
  EXPECT_EQ(report["fix"]["fp32_modules"], (std::vector<std::string>{"amplify", "amplify2"}));
  EXPECT_EQ(report["fix"]["minimal"], true);
  EXPECT_EQ(report["trials"][0]["fp32_modules"], (std::vector<std::string>{"amplify"}));
  EXPECT_EQ(report["trials"][0]["healthy"], false);
  // Each trial's set is a distinct one (the search caches what it ran).
  std::set<std::vector<std::string>> tried;
  for (const auto& trial : report["trials"]) tried.insert(trial["fp32_modules"].get<std::vector<std::string>>());
  EXPECT_EQ(tried.size(), report["trials"].size());
}

TEST(DiagnoseCli, AHealthyRecipeHasNothingToFix) {
  TempDir dir;
  dir.write("r.yaml", kRecipe + "");
  int exit_code = -1;
  const nlohmann::json report =
      json_report(dir, {"diagnose", "r.yaml", "--steps", "4", "--json", "model.overflowing_blocks=0"}, &exit_code);
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(report["healthy"], true);
  EXPECT_TRUE(report["fix"].is_null());
  EXPECT_TRUE(report["trials"].empty());
  EXPECT_TRUE(report["first_nonfinite"].is_null());
  const CommandResult table = run_mixt({"diagnose", "r.yaml", "--steps", "4", "model.overflowing_blocks=0"}, dir.path());
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("healthy: every loss finite"));
}

// A run that diverges in float32 too (a learning rate of 1e30): no fp32_modules can fix it.
TEST(DiagnoseCli, NoFixFoundIsExitOne) {
  TempDir dir;
  dir.write("r.yaml", kRecipe);
  const CommandResult report = run_mixt({"diagnose", "r.yaml", "--steps", "4", "--max-trials", "3",
                                         "precision.name=fp32", "optimizer.lr=1.0e+30", "model.overflowing_blocks=0"},
                                        dir.path());
  EXPECT_EQ(report.exit_code, 1) << report.output;
  EXPECT_THAT(report.output, HasSubstr("no fix found"));
}

TEST(DiagnoseCli, ABadRecipeIsExitTwoWithItsLocation) {
  TempDir dir;
  dir.write("r.yaml", testing::replace_once(kRecipe, "name: amp_fp16", "name: amp_fp61"));
  const CommandResult report = run_mixt({"diagnose", "r.yaml"}, dir.path());
  EXPECT_EQ(report.exit_code, 2) << report.output;
  EXPECT_THAT(report.output, HasSubstr("r.yaml:3:"));
  EXPECT_THAT(report.output, HasSubstr("amp_fp16"));  // the closest match
}

const std::string kFloat8Recipe =
    "plugins: [" + testing::configured::fixture_plugin_dir() + "/libmixt_fixture_float8_outliers.so]\n" +
    "model: {name: fixture_float8_outliers}\n"
    "precision: {name: fp8_tensorwise}\n"
    "optimizer: {name: sgd, lr: 0.01}\n"
    "data: {train: {name: synthetic, shape: [8], num_classes: 4, size: 256, batch_size: 32}}\n"
    "trainer: {device: cpu, epochs: 1, log_every: 1000}\n";

std::vector<std::string> float8_layer_names(const nlohmann::json& report) {
  std::vector<std::string> names;
  for (const auto& layer : report["float8_layers"]) names.push_back(layer["name"]);
  return names;
}

// Tensorwise scaling: spiky's input scale comes from its outliers of 1e7, so the rest of
// its values (about 1) fall below e4m3's smallest subnormal; nothing saturates.
TEST(DiagnoseCli, Float8TensorwiseNamesTheLayerWhoseOutliersMakeTheRestUnderflow) {
  TempDir dir;
  dir.write("r.yaml", kFloat8Recipe);
  int exit_code = -1;
  const nlohmann::json report = json_report(dir, {"diagnose", "r.yaml", "--steps", "6", "--json"}, &exit_code);
  EXPECT_EQ(exit_code, 0);
  // first and head stay bfloat16 (exclude_first_last): the float8 layers are the two between.
  ASSERT_EQ(float8_layer_names(report), (std::vector<std::string>{"hidden", "spiky"})) << report.dump(2);
  const auto& hidden = report["float8_layers"][0];
  const auto& spiky = report["float8_layers"][1];
  EXPECT_GT(spiky["input"]["underflow_fraction"].get<double>(), 0.9) << spiky.dump(2);
  EXPECT_EQ(spiky["input"]["saturated"], 0);
  EXPECT_EQ(spiky["keep_in_bfloat16"], true);
  for (const char* operand : {"input", "weight", "grad_output"}) {
    EXPECT_GT(hidden[operand]["nonzero"].get<std::int64_t>(), 0) << operand;
    EXPECT_LT(hidden[operand]["underflow_fraction"].get<double>(), 0.01) << operand << hidden.dump(2);
    EXPECT_EQ(hidden[operand]["saturated"], 0) << operand;
  }
  EXPECT_EQ(hidden["keep_in_bfloat16"], false);
  ASSERT_FALSE(report["fp8_exclude"].is_null()) << report.dump(2);
  EXPECT_EQ(report["fp8_exclude"]["modules"], (std::vector<std::string>{"spiky"}));
  EXPECT_EQ(report["fp8_exclude"]["recipe_line"], "precision.fp8_exclude: [spiky]");

  const CommandResult table = run_mixt({"diagnose", "r.yaml", "--steps", "6"}, dir.path());
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("float8: 1 of 2 layers lose too much")) << table.output;
  EXPECT_THAT(table.output, HasSubstr("add to the recipe\n  precision.fp8_exclude: [spiky]\n")) << table.output;

  // The line applied: spiky computes in bfloat16, and no float8 layer is left to name.
  const nlohmann::json fixed =
      json_report(dir, {"diagnose", "r.yaml", "--steps", "6", "--json", "precision.fp8_exclude=[spiky]"}, &exit_code);
  EXPECT_EQ(float8_layer_names(fixed), (std::vector<std::string>{"hidden"}));
  EXPECT_TRUE(fixed["fp8_exclude"].is_null()) << fixed.dump(2);
  EXPECT_EQ(fixed["recipe_fp8_exclude"], (std::vector<std::string>{"spiky"}));
}

// Delayed scaling: outliers of 1e3 from step 4 on, where the scales of the steps before
// (from amaxes about 1, with margin 1 for ordinary growth) cannot take them: they saturate.
// Under tensorwise scaling the same outliers lose nothing (1e3 leaves the rest in range).
TEST(DiagnoseCli, Float8DelayedNamesTheLayerWhoseJumpSaturates) {
  TempDir dir;
  dir.write("r.yaml", kFloat8Recipe);
  const std::vector<std::string> jump = {"model.outlier=1000", "model.outliers_from_step=4"};
  std::vector<std::string> args = {
      "diagnose", "r.yaml", "--steps", "6", "--json", "precision.name=fp8_delayed", "precision.margin=1"};
  args.insert(args.end(), jump.begin(), jump.end());
  int exit_code = -1;
  const nlohmann::json report = json_report(dir, args, &exit_code);
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(report["policy"], "fp8_delayed");
  ASSERT_EQ(float8_layer_names(report), (std::vector<std::string>{"hidden", "spiky"})) << report.dump(2);
  const auto& hidden = report["float8_layers"][0];
  const auto& spiky = report["float8_layers"][1];
  EXPECT_EQ(spiky["input"]["saturated"], 4) << spiky.dump(2);  // four rows, at the one step of the jump
  EXPECT_EQ(spiky["first_step"]["input"]["saturated"], 0);
  EXPECT_EQ(spiky["keep_in_bfloat16"], true);
  for (const char* operand : {"input", "weight", "grad_output"}) {
    EXPECT_EQ(hidden[operand]["saturated"], 0) << operand << hidden.dump(2);
    EXPECT_LT(hidden[operand]["underflow_fraction"].get<double>(), 0.01) << operand << hidden.dump(2);
  }
  EXPECT_EQ(report["fp8_exclude"]["modules"], (std::vector<std::string>{"spiky"})) << report.dump(2);

  std::vector<std::string> tensorwise = {"diagnose", "r.yaml", "--steps", "6", "--json"};
  tensorwise.insert(tensorwise.end(), jump.begin(), jump.end());
  const nlohmann::json calm = json_report(dir, tensorwise, &exit_code);
  ASSERT_EQ(float8_layer_names(calm), (std::vector<std::string>{"hidden", "spiky"})) << calm.dump(2);
  EXPECT_EQ(calm["float8_layers"][1]["input"]["saturated"], 0);
  EXPECT_TRUE(calm["fp8_exclude"].is_null()) << calm.dump(2);
}

}  // namespace
}  // namespace mixt
