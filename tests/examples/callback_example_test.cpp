// examples/csv_callback built out of tree against an installed mixt, as docs/plugins.md
// says, then run, resumed, listed and described: the callback kind end to end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "example_environment.h"
#include "test_support.h"

namespace mixt {
namespace {

// The CSV's rows after its header, each as its row and step numbers.
std::vector<std::pair<long, long>> csv_rows(const fs::path& file) {
  std::istringstream lines(testing::read_file(file));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "row,step,loss,lr") << file;
  std::vector<std::pair<long, long>> rows;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string row, step, loss;
    std::getline(fields, row, ',');
    std::getline(fields, step, ',');
    std::getline(fields, loss, ',');
    EXPECT_GT(std::stod(loss), 0.0) << line;
    rows.emplace_back(std::stol(row), std::stol(step));
  }
  return rows;
}

TEST(CallbackExample, BuildsRunsAndResumesAsDocumented) {
  TempDir dir;
  testing::lay_out_example(dir, "csv_callback");
  const std::string shorter = " trainer.max_steps_per_epoch=25 'model.channels=[8, 16]' data.val.limit=500";
  const std::string script = testing::on_shared_install(
      testing::replace_once(testing::documented_commands("docs/plugins.md", "csv_callback"), "run recipe.yaml",
                            "run recipe.yaml" + shorter),
      dir.path());
  const std::string home = testing::example_environment(dir.path());
  const CommandResult first = testing::run_shell(script, dir.path(), home);
  ASSERT_EQ(first.exit_code, 0) << script << "\n" << first.output;

  const fs::path example = dir.path() / "examples/csv_callback";
  // The documented configure names no build type: find_package(mixt) makes it Release.
  EXPECT_THAT(testing::read_file(example / "build/CMakeCache.txt"), HasSubstr("CMAKE_BUILD_TYPE:STRING=Release"));
  std::vector<fs::path> runs;
  for (const auto& entry : fs::directory_iterator(example / "runs/csv_callback")) runs.push_back(entry.path());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(csv_rows(runs[0] / "steps.csv"), (std::vector<std::pair<long, long>>{{1, 10}, {2, 20}}));

  // Resumed for a second epoch: the rows go on from the checkpoint's count.
  const CommandResult resumed = testing::run_shell(
      "\"$HOME/.local/mixt/bin/mixt\" run recipe.yaml" + shorter + " trainer.epochs=2 trainer.resume=" +
          testing::shell_quote(runs[0].string()),
      example, home);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  runs.clear();
  for (const auto& entry : fs::directory_iterator(example / "runs/csv_callback")) runs.push_back(entry.path());
  std::sort(runs.begin(), runs.end());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(csv_rows(runs[1] / "steps.csv"), (std::vector<std::pair<long, long>>{{3, 30}, {4, 40}, {5, 50}}));

  const CommandResult listed =
      testing::run_shell("MIXT_PLUGIN_PATH=build \"$HOME/.local/mixt/bin/mixt\" list callback", example, home);
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr("csv_log"));
  // --recipe loads the recipe's plugins: as run does (MIXT_PLUGIN_PATH is not needed then).
  const CommandResult described = testing::run_shell(
      "\"$HOME/.local/mixt/bin/mixt\" describe callback csv_log --recipe recipe.yaml", example, home);
  ASSERT_EQ(described.exit_code, 0) << described.output;
  EXPECT_THAT(described.output, HasSubstr("every"));
  EXPECT_THAT(described.output, HasSubstr("steps.csv"));
  const CommandResult without = testing::run_shell("\"$HOME/.local/mixt/bin/mixt\" list callback", example, home);
  EXPECT_THAT(without.output, Not(HasSubstr("csv_log")));
  const CommandResult with_recipe =
      testing::run_shell("\"$HOME/.local/mixt/bin/mixt\" list callback --recipe recipe.yaml", example, home);
  EXPECT_THAT(with_recipe.output, HasSubstr("csv_log"));
}

}  // namespace
}  // namespace mixt
