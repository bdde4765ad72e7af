// examples/checkpointed_model built out of tree against an installed mixt, as docs/memory.md
// says: a model of the user's own whose blocks the recipe recomputes (mixt::call_block) and
// whose first layer the model recomputes itself (mixt::recompute_in_backward). Trained with
// both, it must end exactly where the same run without recomputation does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "example_environment.h"
#include "test_support.h"

namespace mixt {
namespace {

std::string line_with(const std::string& text, const std::string& prefix) {
  const auto at = text.find(prefix);
  return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
}

TEST(CheckpointedModelExample, BuildsAndTrainsExactlyAsWithoutRecomputation) {
  TempDir dir;
  testing::lay_out_example(dir, "checkpointed_model");
  const std::string shorter = " trainer.max_steps_per_epoch=30 data.val.limit=1000";
  const std::string script = testing::on_shared_install(
      testing::replace_once(testing::documented_commands("docs/memory.md", "checkpointed_model"), "run recipe.yaml",
                            "run recipe.yaml" + shorter),
      dir.path());
  const std::string home = testing::example_environment(dir.path());
  const CommandResult recomputed = testing::run_shell(script, dir.path(), home);
  ASSERT_EQ(recomputed.exit_code, 0) << script << "\n" << recomputed.output;
  EXPECT_THAT(recomputed.output, HasSubstr("activation checkpointing: 4 submodules recomputed in the backward pass "
                                           "(blocks.0, blocks.1, blocks.2, blocks.3)"));

  const CommandResult plain = testing::run_shell(
      "\"$HOME/.local/mixt/bin/mixt\" run recipe.yaml" + shorter + " trainer.activation_checkpointing=none",
      dir.path() / "examples/checkpointed_model", home);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_THAT(plain.output, ::testing::Not(HasSubstr("activation checkpointing:")));
  const std::string accuracy = line_with(plain.output, "test accuracy:");
  ASSERT_FALSE(accuracy.empty()) << plain.output;
  EXPECT_EQ(line_with(recomputed.output, "test accuracy:"), accuracy);
}

}  // namespace
}  // namespace mixt
