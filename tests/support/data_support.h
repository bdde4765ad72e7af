// Helpers for the input-pipeline suites: datasets built from a YAML section, whole epochs
// collected, fixture trees made by the committed Python scripts in tests/fixtures/data.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "shared_setup.h"
#include "test_support.h"

namespace mixt::testing {

// A dataset from `yaml` (the section under data:), as the trainer would build it.
inline std::unique_ptr<Dataset> make_dataset(BuiltPlugins& plugins, const std::string& yaml,
                                             DatasetContext context = {"train", 0, 0, 1, at::kCPU}) {
  static std::vector<RecipeNodePtr> keep_alive;
  keep_alive.push_back(parse_yaml("data: " + yaml, "test.yaml"));
  auto dataset = plugins.registry.make_dataset(Config(keep_alive.back(), "").section("data"), context);
  check_unknown_keys(*keep_alive.back());
  return dataset;
}

// Every batch of one epoch.
inline std::vector<Batch> collect_epoch(Dataset& data, std::int64_t epoch) {
  data.start_epoch(epoch);
  std::vector<Batch> batches;
  while (auto batch = data.next_batch()) batches.push_back(*batch);
  return batches;
}

inline bool same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i].inputs, b[i].inputs) || !at::equal(a[i].targets, b[i].targets)) return false;
  }
  return true;
}

// Runs tests/fixtures/data/SCRIPT with ARGS; fails the test when it fails.
inline void run_fixture_script(const std::string& script, const std::string& args) {
  const std::string command =
      "python3 " + shell_quote(testing::configured::source_dir() + "/tests/fixtures/data/" + script) + " " + args;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

// The tree tests/fixtures/data/SCRIPT writes (SCRIPT OUT ARGS), made once for the suite's
// processes (shared_setup.h) and kept while the script and ARGS stay the same. Files the script
// writes beside OUT (OUT.suffix) are there too.
inline std::filesystem::path fixture_tree(const std::string& script, const std::string& args = "") {
  const std::string text = read_file(configured::source_dir() + "/tests/fixtures/data/" + script);
  const std::filesystem::path made = shared_setup(
      std::filesystem::path(script).stem().string() + "-" + stable_hash(text + '\0' + args), false,
      [&](const std::filesystem::path& dir) {
        run_fixture_script(script, shell_quote((dir / "tree").string()) + (args.empty() ? "" : " " + args));
      });
  return made / "tree";
}

}  // namespace mixt::testing
