// End to end, the real `mixt` binary: every precision policy trains Fashion-MNIST
// (recipes/fashion_mnist.yaml, policy overridden on the command line) to a real accuracy;
// amp_fp16 logs loss_scale and skipped_steps to metrics.jsonl and the progress line;
// fp32_modules errors; and the out-of-tree example of docs/writing-a-policy.md is installed, built
// from its installed copy and run with the very commands the document shows, its
// stochastic-rounding master weights resumed bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "example_environment.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

const std::string kRecipe = testing::configured::source_dir() + "/recipes/fashion_mnist.yaml";

double test_accuracy(const std::string& output) {
  std::smatch match;
  if (!std::regex_search(output, match, std::regex(R"(test accuracy: ([0-9.]+)%)"))) return -1;
  return std::stod(match[1]);
}

fs::path only_run_directory(const fs::path& output) {
  for (const auto& name : fs::directory_iterator(output)) {
    for (const auto& stamp : fs::directory_iterator(name.path())) return stamp.path();
  }
  return {};
}

// A shortened run of the demo recipe with a narrower net: CI has two shared cores, and
// float16 autocast on the CPU is several times slower than fp32 (few float16 kernels). The
// full recipe's 5-epoch accuracies, measured by hand, are in docs/benchmarks.md.
constexpr int kSteps = 80;           // of 469 per epoch: 10240 images
constexpr double kMinAccuracy = 70;  // untrained: ~10%; measured at 60 steps: fp32 73.4%, amp_bf16 74.0%
const std::vector<std::string> kSmaller = {"model.channels=[8, 16]", "model.hidden=64", "data.val.limit=2000"};

class PolicyTrains : public ::testing::TestWithParam<std::string> {};

TEST_P(PolicyTrains, FashionMnistShortRun) {
  TempDir dir;
  std::vector<std::string> args = {"run", kRecipe, "precision.name=" + GetParam(), "trainer.epochs=1",
                                   "trainer.max_steps_per_epoch=" + std::to_string(kSteps),
                                   "output=" + dir.path().string()};
  args.insert(args.end(), kSmaller.begin(), kSmaller.end());
  const CommandResult result = run_mixt(args, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_GE(test_accuracy(result.output), kMinAccuracy) << result.output;
  // Scaling policies start at 2^16 and may skip a few steps while the scale calibrates;
  // the others never skip.
  const bool scales = GetParam() == "amp_fp16" || GetParam() == "custom_scaler" || GetParam() == "fp16_master";
  std::smatch skipped;
  ASSERT_TRUE(std::regex_search(result.output, skipped, std::regex(R"(\(([0-9]+) skipped\))"))) << result.output;
  if (scales) {
    EXPECT_LE(std::stoi(skipped[1]), 5) << result.output;
  } else {
    EXPECT_EQ(std::stoi(skipped[1]), 0) << result.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Precision, PolicyTrains,
                         ::testing::Values("fp32", "tf32", "amp_fp16", "amp_bf16", "custom_scaler", "bf16_master",
                                           "fp16_master", "bf16_true"),
                         [](const auto& info) { return info.param; });

TEST(PrecisionCli, AmpFp16LogsLossScaleAndSkippedSteps) {
  TempDir dir;
  const CommandResult result =
      run_mixt({"run", kRecipe, "precision={name: amp_fp16, init_scale: 1024.0, growth_interval: 5}",
                "trainer.epochs=1", "trainer.max_steps_per_epoch=20", "trainer.log_every=10", "model.channels=[8, 16]",
                "data.train.limit=2560", "data.val.limit=500", "output=" + dir.path().string()},
               dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("loss_scale 4096 skipped_steps 0"));
  const fs::path run = only_run_directory(dir.path());
  std::ifstream metrics(run / "metrics.jsonl");
  std::string line;
  std::vector<double> scales;
  while (std::getline(metrics, line)) {
    const auto json = nlohmann::json::parse(line);
    if (json.at("event") != "step") continue;
    scales.push_back(json.at("loss_scale").get<double>());
    EXPECT_EQ(json.at("skipped_steps").get<double>(), 0) << line;
  }
  // Grows every 5 finite steps: 4096 after 10 steps, 16384 after 20.
  EXPECT_EQ(scales, (std::vector<double>{4096, 16384}));
}

// A static scale that overflows every step skips them all: the run ended "done", exit 0,
// weights untouched, without a word beyond the skipped count.
TEST(PrecisionCli, AnEpochInWhichEveryStepWasSkippedIsWarnedAbout) {
  TempDir dir;
  const CommandResult result =
      run_mixt({"run", kRecipe, "precision={name: custom_scaler, mode: static, init_scale: 1.0e+30}",
                "trainer.epochs=1", "trainer.max_steps_per_epoch=2", "data.train.limit=256", "data.val=null",
                "model.channels=[8, 16]", "output=" + dir.path().string()},
               dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("mixt: warning: the precision policy skipped every step of epoch 1 (2 of them"),
            std::string::npos)
      << result.output;
  // In the run's metrics too, as an event of its own.
  fs::path metrics;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
    if (entry.path().filename() == "metrics.jsonl") metrics = entry.path();
  }
  ASSERT_FALSE(metrics.empty());
  bool warned = false;
  std::istringstream lines(testing::read_file(metrics));
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    warned = warned || (event["event"] == "warning" &&
                        event["message"].get<std::string>().rfind("the precision policy skipped every step", 0) == 0);
  }
  EXPECT_TRUE(warned) << testing::read_file(metrics);
}

TEST(PrecisionCli, Fp32ModulesAreCheckedAgainstTheModel) {
  TempDir dir;
  const std::string tiny = "data.train.limit=256";
  const std::string narrow = "model.channels=[8, 16]";
  CommandResult result = run_mixt({"check", kRecipe, "precision={name: amp_bf16, fp32_modules: [clasifier]}", tiny},
                                  dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("no submodule named 'clasifier'"));
  EXPECT_THAT(result.output, HasSubstr("did you mean 'classifier'"));
  result =
      run_mixt({"run", kRecipe, "precision={name: amp_bf16, fp32_modules: [classifier]}", "trainer.epochs=1",
                "trainer.max_steps_per_epoch=3", tiny, narrow, "data.val.limit=100", "output=" + dir.path().string()},
               dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const std::string marker = "run directory: ";
  const std::size_t at = result.output.find(marker);
  ASSERT_NE(at, std::string::npos) << result.output;
  const std::string run_directory =
      result.output.substr(at + marker.size(), result.output.find('\n', at) - at - marker.size());
  // `mixt check` finds it too, with one blank forward pass (it said ok, and the run then
  // failed after its first step, with a run directory made).
  result = run_mixt({"check", kRecipe, "precision={name: amp_bf16, fp32_modules: [classifier.0]}", tiny, narrow},
                    dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("the model never ran 'classifier.0' through mixt::call_submodule"))
      << result.output;
  // Checked after the first step of every process: resuming a run with a name the model
  // does not route trained to the end (the check looked at global step 0 only).
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"trainer.epochs=1"},
        std::vector<std::string>{"trainer.epochs=2", "trainer.resume=" + run_directory}}) {
    std::vector<std::string> args = {"run", kRecipe, "precision={name: amp_bf16, fp32_modules: [classifier.0]}",
                                     "trainer.max_steps_per_epoch=3", tiny, narrow, "data.val.limit=100",
                                     "output=" + dir.path().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    result = run_mixt(args, dir.path());
    EXPECT_EQ(result.exit_code, 2) << result.output;
    // At the option's place, said once (it read "precision.fp32_modules: precision.fp32_modules: ...").
    EXPECT_THAT(result.output, HasSubstr("mixt: error: command line 'precision={name: amp_bf16, fp32_modules: "
                                 "[classifier.0]}': precision.fp32_modules: the model never ran 'classifier.0' "
                                 "through mixt::call_submodule"))
        << result.output;
  }
}

// Followed as an installed-SDK user would: the installed copy of the example
// (share/mixt/examples/custom_precision), not the source tree's.
TEST(PrecisionCli, CustomPrecisionExampleBuildsAndRunsAsDocumented) {
  TempDir dir;
  // A shorter run than the document's, and nothing else changed.
  const std::string documented = testing::documented_commands("docs/writing-a-policy.md", "custom_precision");
  const std::string shorter = " trainer.max_steps_per_epoch=30 'model.channels=[8, 16]' data.val.limit=500";
  const std::string script = testing::on_shared_install(
      testing::replace_once(testing::replace_once(documented, "run recipe.yaml", "run recipe.yaml" + shorter),
                            "run recipe_master.yaml", "run recipe_master.yaml" + shorter),
      dir.path());
  const std::string home = testing::example_environment(dir.path());
  const CommandResult result = testing::run_shell(script, dir.path(), home);
  ASSERT_EQ(result.exit_code, 0) << script << "\n" << result.output;
  EXPECT_THAT(result.output, HasSubstr("loss_scale"));
  EXPECT_GE(test_accuracy(result.output), 40) << result.output;  // 30 steps: it learns, nothing more
  // The master-weight example ran second: its run directory holds float32 masters.
  EXPECT_THAT(result.output, HasSubstr("runs/custom_master_weights/"));
  std::smatch accuracies;
  std::string rest = result.output;
  double last = 0;
  while (std::regex_search(rest, accuracies, std::regex(R"(test accuracy: ([0-9.]+)%)"))) {
    last = std::stod(accuracies[1]);
    rest = accuracies.suffix();
  }
  EXPECT_GE(last, 40) << result.output;
  EXPECT_TRUE(fs::exists(dir.path() / ".local/mixt/lib/cmake/mixt/mixtConfig.cmake"));
  // The copy came from the installed examples, which hold no build of their own.
  EXPECT_TRUE(fs::exists(dir.path() / ".local/mixt/share/mixt/examples/custom_precision/my_master.cpp"));
  EXPECT_FALSE(fs::exists(dir.path() / ".local/mixt/share/mixt/examples/custom_precision/build"));

  // Stochastic rounding resumes bit for bit: epoch 2 resumed from the documented run's
  // checkpoint ends with the masters of two epochs run straight (only the step count is
  // checkpointed besides the masters; each step's random bits come from seed and step).
  const fs::path example = dir.path() / "custom_precision";
  const fs::path first = testing::only_run_directory(example / "runs/custom_master_weights");
  ASSERT_FALSE(first.empty());
  const std::string mixt = "\"$HOME/.local/mixt/bin/mixt\" run recipe_master.yaml" + shorter + " trainer.epochs=2";
  const CommandResult resumed =
      testing::run_shell(mixt + " trainer.resume=" + testing::shell_quote(first.string()), example, home);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const CommandResult straight = testing::run_shell(mixt + " output=straight", example, home);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  fs::path second;
  for (const auto& entry : fs::directory_iterator(example / "runs/custom_master_weights")) {
    if (entry.path() != first && !entry.is_symlink()) second = entry.path();
  }
  ASSERT_FALSE(second.empty());
  const fs::path both = testing::only_run_directory(example / "straight/custom_master_weights");
  const auto exported = [&](const fs::path& run, const std::string& file) {
    const CommandResult result = run_mixt({"export", (run / "checkpoints/last").string(), "-o", file}, example);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return testing::read_file(example / file);
  };
  const std::string after_one = exported(first, "one.safetensors");
  const std::string after_resume = exported(second, "resumed.safetensors");
  // Compared as booleans: a failure would otherwise print two binary files.
  EXPECT_TRUE(after_resume == exported(both, "straight.safetensors"))
      << "the resumed masters differ from the straight run's";
  EXPECT_TRUE(after_resume != after_one) << "the second epoch changed nothing";
}

}  // namespace
}  // namespace mixt
