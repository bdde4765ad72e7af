// examples/custom_float8 (a float8 recipe of its own: power-of-two scales) built out of tree
// from the installed copy of the example, against the installed SDK, with the commands of
// docs/writing-a-policy.md ("A float8 recipe of your own"): it is described, it puts simple_cnn's
// hidden layer in float8 (mixt check), it trains, and a bad option is a recipe error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "example_environment.h"
#include "test_support.h"

namespace mixt {
namespace {

TEST(Float8Example, BuildsFromTheInstalledCopyAndTrainsAsDocumented) {
  TempDir dir;
  const std::string shorter =
      " trainer.max_steps_per_epoch=30 'model.channels=[8, 16]' model.hidden=32 data.val.limit=500";
  const std::string script = testing::on_shared_install(
      testing::replace_once(testing::documented_commands("docs/writing-a-policy.md", "custom_float8"),
                            "run recipe.yaml", "run recipe.yaml" + shorter),
      dir.path());
  const std::string home = testing::example_environment(dir.path());
  const CommandResult result = testing::run_shell(script, dir.path(), home);
  ASSERT_EQ(result.exit_code, 0) << script << "\n" << result.output;
  // `mixt describe precision pow2_float8 --recipe recipe.yaml`, in the documented commands.
  EXPECT_THAT(result.output, HasSubstr("power of two"));
  EXPECT_THAT(result.output, HasSubstr("margin"));
  std::smatch accuracy;
  ASSERT_TRUE(std::regex_search(result.output, accuracy, std::regex(R"(test accuracy: ([0-9.]+)%)"))) << result.output;
  EXPECT_GE(std::stod(accuracy[1]), 40) << result.output;  // 30 steps: it learns (chance: 10%)

  // Its layer choice (`mixt check recipe.yaml`, documented): simple_cnn's hidden layer
  // (3136 -> 128) in float8, the last (128 -> 10) not.
  EXPECT_THAT(result.output, HasSubstr("linear    2 layers, 1 computed by the precision policy")) << result.output;
  const fs::path example = dir.path() / "custom_float8";
  // A bad option is a recipe error at its place.
  const CommandResult bad =
      testing::run_shell("\"$HOME/.local/mixt/bin/mixt\" check recipe.yaml precision.margin=40", example, home);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("precision.margin")) << bad.output;
  const CommandResult listed =
      testing::run_shell("\"$HOME/.local/mixt/bin/mixt\" list precision --recipe recipe.yaml", example, home);
  EXPECT_THAT(listed.output, HasSubstr("pow2_float8")) << listed.output;
}

}  // namespace
}  // namespace mixt
