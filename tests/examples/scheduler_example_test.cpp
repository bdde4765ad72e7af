// examples/linear_decay (a learning-rate schedule) built out of tree from the installed copy
// of the example, against the installed SDK, with the commands of docs/plugins.md ("A
// learning-rate schedule"): described, run with two micro-batches per step, and its logged
// rates held to LinearLR's closed form, computed here by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "example_environment.h"
#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

TEST(SchedulerExample, BuildsFromTheInstalledCopyAndDecaysAsDocumented) {
  TempDir dir;
  // 20 optimizer steps per epoch of 2 micro-batches each: the schedule spans 2 x 20 = 40
  // steps (counted in batches it would be 80, and the rates below would be off).
  const std::string shorter =
      " trainer.max_steps_per_epoch=20 trainer.accumulate=2 'model.channels=[8, 16]' model.hidden=32 data.val.limit=500";
  const std::string script = testing::on_shared_install(
      testing::replace_once(testing::documented_commands("docs/plugins.md", "linear_decay"), "run recipe.yaml",
                            "run recipe.yaml" + shorter),
      dir.path());
  const std::string home = testing::example_environment(dir.path());
  const CommandResult result = testing::run_shell(script, dir.path(), home);
  ASSERT_EQ(result.exit_code, 0) << script << "\n" << result.output;
  // `mixt describe scheduler linear_decay --recipe recipe.yaml`, in the documented commands.
  EXPECT_THAT(result.output, HasSubstr("end_factor"));
  EXPECT_THAT(result.output, HasSubstr("the run's optimizer steps"));

  // recipe.yaml: sgd lr 0.05, end_factor 0.1. The rate logged after step s is the one the
  // schedule set for the next: 0.05 * (1 + (0.1 - 1) * s / 40).
  const fs::path run = testing::only_run_directory(dir.path() / "linear_decay/runs/linear_decay");
  std::istringstream metrics(testing::read_file(run / "metrics.jsonl"));
  std::vector<std::int64_t> steps;
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["event"] != "step") continue;
    const std::int64_t step = record["step"].get<std::int64_t>();
    steps.push_back(step);
    const double expected = 0.05 * (1.0 + (0.1 - 1.0) * static_cast<double>(step) / 40.0);
    EXPECT_NEAR(record["lr"].get<double>(), expected, 1e-12) << line;
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{10, 20, 30, 40}));

  const fs::path example = dir.path() / "linear_decay";
  const CommandResult bad =
      testing::run_shell("\"$HOME/.local/mixt/bin/mixt\" check recipe.yaml scheduler.end_factor=2", example, home);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("scheduler.end_factor")) << bad.output;
}

}  // namespace
}  // namespace mixt
