#include "common/closest_match.h"

#include <gtest/gtest.h>

namespace mixt {
namespace {

// Distances worked out by hand.
TEST(EditDistance, CountsInsertionsDeletionsSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("sgd", "sgd"), 0u);
  EXPECT_EQ(edit_distance("sgd", "sdg"), 2u);     // two substitutions
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("lr", ""), 2u);
  EXPECT_EQ(edit_distance("epoch", "epochs"), 1u);
}

TEST(ClosestMatch, SuggestsOnlyPlausibleTypos) {
  const std::vector<std::string> names = {"adamw", "sgd", "lamb"};
  EXPECT_EQ(closest_match("sdg", names), "sgd");
  EXPECT_EQ(closest_match("adam", names), "adamw");
  EXPECT_FALSE(closest_match("rmsprop_centered", names).has_value());
}

TEST(SuggestionHint, ListsKnownNamesSorted) {
  EXPECT_EQ(suggestion_hint("sdg", {"sgd", "adamw"}, "known optimizers"),
            "did you mean 'sgd'? known optimizers: adamw, sgd");
  EXPECT_EQ(suggestion_hint("xyzzy_plugh", {"sgd"}), "known: sgd");
}

// "amp" is five edits from amp_fp16: no typo, but the start of a name.
TEST(SuggestionHint, ANameCutShortIsOfferedItsCompletions) {
  const std::vector<std::string> policies = {"fp32", "amp_fp16", "amp_bf16", "tf32"};
  EXPECT_EQ(suggestion_hint("amp", policies),
            "did you mean 'amp_bf16' or 'amp_fp16'? known: amp_bf16, amp_fp16, fp32, tf32");
  // More than three is a list, not a suggestion.
  EXPECT_EQ(suggestion_hint("resn", {"resnet18", "resnet34", "resnet50", "resnet101"}),
            "known: resnet101, resnet18, resnet34, resnet50");
}

}  // namespace
}  // namespace mixt
