// examples/multi_label_task (a task of one's own: multi-label classification with binary
// cross-entropy and mean average precision) built out of tree from the installed copy, with
// the commands of docs/plugins.md ("A task"), and nothing of mixt changed for it: it trains,
// the monitors and the run's last line take its figure, and `mixt evaluate`'s mAP equals the
// one numpy computes (tests/support/multi_label_reference.py) from the scores of the trained
// model's TorchScript export on the same test set.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "example_environment.h"
#include "run_directories.h"
#include "json_output.h"
#include "test_support.h"

namespace mixt {
namespace {

// The recipe's attributes, as the reference reads them: the classes of each.
const char* kAttributes = "[[0, 2, 3, 4, 6], [2, 4, 6], [1, 3], [5, 7, 9], [5], [8]]";

// One test: under ctest each test is a process of its own, and building and training the
// example is most of its time.
TEST(TaskExample, BuildsFromTheInstalledCopyTrainsAndItsMapIsTheReferences) {
  TempDir dir;
  const std::string shorter =
      " trainer.max_steps_per_epoch=40 'model.channels=[8, 16]' model.hidden=32 trainer.threads=2";
  const std::string script = testing::on_shared_install(
      testing::replace_once(testing::documented_commands("docs/plugins.md", "multi_label_task"), "run recipe.yaml",
                            "run recipe.yaml" + shorter),
      dir.path());
  const std::string home = testing::example_environment(dir.path());
  const CommandResult result = testing::run_shell(script, dir.path(), home);
  ASSERT_EQ(result.exit_code, 0) << script << "\n" << result.output;
  // `mixt describe task multi_label`: the option the example declares.
  EXPECT_THAT(result.output, HasSubstr("attributes"));
  // The run's last line is mixt's own for a task without a summary of its own.
  EXPECT_THAT(result.output, HasSubstr("validation: loss "));
  EXPECT_THAT(result.output, HasSubstr(", mAP "));

  const fs::path example = dir.path() / "multi_label_task";
  const fs::path run = testing::only_run_directory(example / "runs/multi_label");
  std::istringstream metrics(testing::read_file(run / "metrics.jsonl"));
  std::vector<double> maps;
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["event"] == "epoch") maps.push_back(record["val_map"].get<double>());
  }
  ASSERT_EQ(maps.size(), 2u);
  // best_checkpoint watches val_map, a figure mixt knows only from the task: the better epoch's.
  EXPECT_TRUE(fs::exists(run / "checkpoints" / (maps[1] >= maps[0] ? "best-epoch-0002" : "best-epoch-0001")));

  const std::string mixt = "\"$HOME/.local/mixt/bin/mixt\"";
  const CommandResult evaluated =
      testing::run_shell(mixt + " evaluate " + testing::shell_quote(run.string()) + " --json", example, home);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  const nlohmann::json report = testing::json_document(evaluated.output);
  ASSERT_EQ(report["samples"], 10000);
  const double map = report["map"].get<double>();
  EXPECT_FALSE(report.contains("per_class")) << "a task without a confusion matrix has no per-class table";

  const CommandResult exported = testing::run_shell(mixt + " export " + testing::shell_quote(run.string()) + " -o " +
                                                        testing::shell_quote((dir.path() / "m.pt").string()),
                                                    example, home);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  dir.write("attributes.json", kAttributes);
  const fs::path results = dir.path() / "reference.json";
  const CommandResult reference = testing::run_command(
      testing::shell_quote(MIXT_PYTHON) + " " +
      testing::shell_quote((testing::source_dir() / "tests/support/multi_label_reference.py").string()) + " " +
      testing::shell_quote((dir.path() / "m.pt").string()) + " /usr/share/datasets/fashion-mnist " +
      testing::shell_quote((dir.path() / "attributes.json").string()) + " " + testing::shell_quote(results.string()));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const nlohmann::json r = nlohmann::json::parse(testing::read_file(results));
  ASSERT_EQ(r["samples"], 10000);
  // 80 steps learn the attributes (chance is the positives' share: a mAP near 0.3).
  EXPECT_GT(map, 0.8);
  // The same binned scores: equal but for a score a float rounding moves across a bin edge.
  EXPECT_NEAR(map, r["map_binned"].get<double>(), 1e-4) << r["near_bin_edges"] << " scores within 1e-6 of a bin edge";
  // The bins cost little against the exact scores' mAP.
  EXPECT_NEAR(map, r["map_exact"].get<double>(), 2e-3);
  std::cout << "[ measured ] multi_label_task: mAP over the Fashion-MNIST test set, mixt evaluate " << map
            << ", numpy on the TorchScript scores binned " << r["map_binned"] << ", exact " << r["map_exact"] << "\n";

  // A class the data does not have is a recipe error at the option.
  const CommandResult bad = testing::run_shell(
      mixt + " check recipe.yaml 'task.attributes=[\"footwear: 5 7 12\"]' model.num_classes=1", example, home);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output,
              HasSubstr("task.attributes: attribute 'footwear' names class 12, and the data has 10 classes"));
  const CommandResult malformed =
      testing::run_shell(mixt + " check recipe.yaml 'task.attributes=[footwear]'", example, home);
  EXPECT_EQ(malformed.exit_code, 2) << malformed.output;
  EXPECT_THAT(malformed.output, HasSubstr("'footwear' is not \"name: class class ...\""));
}

}  // namespace
}  // namespace mixt
