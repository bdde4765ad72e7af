// examples/residual_cnn (a convolutional model routed for fp32 regions and activation
// checkpointing, with mixt::BatchNorm2d) built out of tree from the installed copy, with the
// commands of docs/plugins.md ("A model"): `mixt check` prints what the document shows, and
// the recipe trains with its blocks recomputed and its head in float32.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "example_environment.h"
#include "test_support.h"

namespace mixt {
namespace {

// The ```text block of docs/plugins.md that shows `mixt check`'s lines for the example.
std::string documented_check_lines() {
  const std::string doc = testing::read_file(fs::path(MIXT_SOURCE_DIR) / "docs/plugins.md");
  const auto marker = doc.find("<!-- e2e: residual_cnn -->");
  const auto begin = doc.rfind("```text\n", marker) + 8;
  return doc.substr(begin, doc.find("```", begin) - begin);
}

TEST(ModelExample, ResidualCnnBuildsFromTheInstalledCopyAndTrainsAsDocumented) {
  TempDir dir;
  fs::create_directory_symlink(MIXT_BINARY_DIR, dir.path() / "build");  // the checkout's build, installed first
  const std::string shorter = " trainer.max_steps_per_epoch=30 model.width=16 data.val.limit=500";
  const std::string script = testing::replace_once(testing::documented_commands("docs/plugins.md", "residual_cnn"),
                                                   "run recipe.yaml", "run recipe.yaml" + shorter);
  const std::string home = testing::example_environment(dir.path());
  const CommandResult result = testing::run_shell(script, dir.path(), home);
  ASSERT_EQ(result.exit_code, 0) << script << "\n" << result.output;

  const std::string lines = documented_check_lines();
  ASSERT_THAT(lines, HasSubstr("routed")) << "docs/plugins.md lost the example's check lines";
  EXPECT_THAT(result.output, HasSubstr(lines)) << result.output;
  EXPECT_THAT(result.output, HasSubstr("activation checkpointing: 3 submodules recomputed in the backward pass "
                                       "(blocks.0, blocks.1, blocks.2)"))
      << result.output;
  std::smatch accuracy;
  ASSERT_TRUE(std::regex_search(result.output, accuracy, std::regex(R"(test accuracy: ([0-9.]+)%)"))) << result.output;
  // 30 steps: it learns (chance is 10%; 38.6% on an AMD EPYC with avx512_bf16).
  EXPECT_GE(std::stod(accuracy[1]), 25) << result.output;

  // A convolution inside a block is a submodule but not routed: the hint offers what is.
  const CommandResult unrouted = testing::run_shell(
      "\"$HOME/.local/mixt/bin/mixt\" check recipe.yaml 'precision.fp32_modules=[blocks.0.conv1]'",
      dir.path() / "residual_cnn", home);
  EXPECT_EQ(unrouted.exit_code, 2) << unrouted.output;
  EXPECT_THAT(unrouted.output, HasSubstr("the submodules it routes: blocks.0, blocks.1, blocks.2, head"))
      << unrouted.output;
}

}  // namespace
}  // namespace mixt
