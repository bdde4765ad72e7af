// Config: typed option reads with file:line:column errors, and the unknown-key check.
#include "mixt/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "expect_error.h"

#include "recipe/recipe_loader.h"

using ::testing::HasSubstr;

namespace mixt {
namespace {

Config section_of(const std::string& yaml, const std::string& key, RecipeNodePtr* root_out = nullptr) {
  RecipeNodePtr root = parse_yaml(yaml, "r.yaml");
  if (root_out) *root_out = root;
  return Config(root, "").section(key);
}

TEST(Config, ReadsTypedValuesAndFallbacks) {
  const Config c = section_of(
      "optimizer:\n  lr: 0.25\n  steps: 12\n  nesterov: true\n  name: sgd\n  betas: [0.5, 0.75]\n"
      "  tags: [a, b]\n  quoted: \"3\"\n",
      "optimizer");
  EXPECT_DOUBLE_EQ(c.number("lr"), 0.25);
  EXPECT_EQ(c.integer("steps"), 12);
  EXPECT_TRUE(c.boolean("nesterov", false));
  EXPECT_EQ(c.string("name"), "sgd");
  EXPECT_EQ(c.numbers("betas", {}), (std::vector<double>{0.5, 0.75}));
  EXPECT_EQ(c.strings("tags", {}), (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(c.number("absent", 7.5), 7.5);
  EXPECT_EQ(c.path(), "optimizer");
  // An integer is a number too; a quoted "3" is a string, not a number.
  EXPECT_DOUBLE_EQ(c.number("steps"), 12.0);
  EXPECT_THROW(c.number("quoted"), Error);
}

TEST(Config, WrongTypeNamesFileLineColumnAndKeyPath) {
  const Config c = section_of("model: {name: x}\noptimizer:\n  name: sgd\n  lr: fast\n", "optimizer");
  const Error e = testing::thrown_error([&] {
    c.number("lr");
  });
  // "fast" starts on line 4, column 7 (counted by hand).
  EXPECT_STREQ(e.what(), "r.yaml:4:7: optimizer.lr: expected a number, got \"fast\"");
  EXPECT_EQ(e.exit_code(), 2);
}

// NaN passes every range check a plugin writes (lr < 0 is false for NaN); no option means
// an infinite value either.
TEST(Config, InfinityAndNanAreNotNumbersAnOptionTakes) {
  const Config c = section_of("o:\n  lr: .nan\n  max: .inf\n  low: -.inf\n  big: 1e999\n  betas: [0.9, .nan]\n", "o");
  const std::pair<const char*, const char*> cases[] = {
      {"lr", "r.yaml:2:7: o.lr: expected a finite number, got .nan"},
      {"max", "r.yaml:3:8: o.max: expected a finite number, got .inf"},
      {"low", "r.yaml:4:8: o.low: expected a finite number, got -.inf"},
      {"big", "r.yaml:5:8: o.big: expected a finite number, got .inf"},  // out of a double's range
  };
  for (const auto& [key, message] : cases) {
    try {
      c.number(key, 1.0);
      ADD_FAILURE() << key << ": expected an error";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), message);
    }
  }
  EXPECT_THROW(c.number("lr"), Error);
  EXPECT_THROW(c.numbers("betas", {}), Error);
}

TEST(Config, MissingRequiredOptionIsAnError) {
  const Config c = section_of("optimizer:\n  name: sgd\n", "optimizer");
  EXPECT_THROW(c.number("lr"), Error);
}

// "treshold:" next to a missing "threshold" used to report only the missing option.
TEST(Config, AMisspelledRequiredOptionIsPointedAt) {
  const Config c = section_of("stopper:\n  name: x\n  treshold: 2\n", "stopper");
  const Error e = testing::thrown_error([&] {
    c.number("threshold");
  });
  EXPECT_STREQ(e.what(), "r.yaml:3:3: stopper.treshold: unknown key 'treshold' in 'stopper', which misses the "
                         "required option 'threshold'");
  EXPECT_EQ(e.hint(), "did you mean `threshold:`?");
}

TEST(Config, AKeyFarFromTheMissingOptionIsNoMisspelling) {
  const Config c = section_of("optimizer:\n  name: sgd\n  wd: 0.1\n", "optimizer");
  const Error e = testing::thrown_error([&] {
    c.number("lr");
  });
  EXPECT_THAT(e.what(), HasSubstr("optimizer.lr: missing required option"));
}

// An absent section has no line of its own; its errors still name the recipe file.
TEST(Config, AnAbsentSectionsErrorsNameTheFile) {
  const Config absent = section_of("model: {name: x}\n", "trainer");
  const Error e = testing::thrown_error([&] {
    absent.number("lr");
  });
  EXPECT_STREQ(e.what(), "r.yaml: trainer.lr: missing required option");
}

TEST(Config, IntegerRejectsFractions) {
  const Config c = section_of("t:\n  epochs: 2.5\n", "t");
  EXPECT_THROW(c.integer("epochs"), Error);
}

TEST(Config, UnknownKeyIsReportedWithClosestKnownKey) {
  RecipeNodePtr root;
  const Config c = section_of("trainer:\n  epochs: 2\n  seeed: 3\n", "trainer", &root);
  c.integer("epochs", 1);
  c.integer("seed", 0);
  const Error e = testing::thrown_error([&] {
    check_unknown_keys(*root);
  });
  EXPECT_STREQ(e.what(), "r.yaml:3:3: trainer.seeed: unknown key 'seeed' in 'trainer'");
  EXPECT_THAT(e.hint(), HasSubstr("did you mean 'seed'?"));
}

// `mixt run r.yaml epochs=3` meant trainer.epochs: the hint names the section that knows it.
TEST(Config, AKeyOutsideTheSectionThatKnowsItIsPointedThere) {
  const std::pair<std::string, std::string> cases[] = {
      {"epochs", "did you mean trainer.epochs?"},
      {"batch_size", "did you mean data.train.batch_size or data.val.batch_size?"},
  };
  for (const auto& [key, hint] : cases) {
    RecipeNodePtr root =
        parse_yaml("trainer: {epochs: 2}\ndata: {train: {batch_size: 8}, val: {batch_size: 8}}\n" + key + ": 3\n",
                   "r.yaml");
    const Config recipe(root, "");
    recipe.section("trainer").integer("epochs", 1);
    const Config data = recipe.section("data");
    data.section("train").integer("batch_size", 1);
    data.section("val").integer("batch_size", 1);
    try {
      check_unknown_keys(*root);
      ADD_FAILURE() << "expected an error for " << key;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "r.yaml:3:1: " + key + ": unknown key '" + key + "' in the recipe");
      EXPECT_EQ(e.hint(), hint);
    }
  }
}

TEST(Config, AllKeysReadPassesTheCheck) {
  RecipeNodePtr root;
  const Config c = section_of("trainer:\n  epochs: 2\n", "trainer", &root);
  c.integer("epochs", 1);
  EXPECT_NO_THROW(check_unknown_keys(*root));
}

TEST(Config, KeysOfAnUnopenedTopLevelSectionAreUnknown) {
  RecipeNodePtr root = parse_yaml("trainer: {epochs: 2}\ntrainr: {seed: 1}\n", "r.yaml");
  Config(root, "").section("trainer").integer("epochs", 1);
  EXPECT_THROW(check_unknown_keys(*root), Error);
}

}  // namespace
}  // namespace mixt
