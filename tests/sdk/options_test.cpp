// mixt/options.h: an option declared once. The default `mixt describe` shows must read back
// as the default the reader uses, checks fail at the value's file:line:column, and a
// required option without its key is Config's missing-key error.
#include "mixt/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "recipe/recipe_loader.h"

using ::testing::HasSubstr;

namespace mixt {
namespace {

Config section_of(const std::string& yaml, const std::string& key = "c") {
  return Config(parse_yaml(yaml, "r.yaml"), "").section(key);
}

// Writes the option's documented default into a recipe and reads it back through the option.
template <class T>
T reread(const Option<T>& option) {
  const std::string yaml = "c:\n  " + option.name() + ": " + option.doc().default_value + "\n";
  const Config c = section_of(yaml);
  EXPECT_TRUE(c.has(option.name())) << "the doc's default reads as no value at all:\n" << yaml;
  return option.read(c);
}

bool same_double(double a, double b) { return a == b && std::signbit(a) == std::signbit(b); }

TEST(Options, DoubleDefaultsReadBackAsTheSameValue) {
  for (const double value : {0.0, -0.0, 0.1, 1e-8, 1.0 / 3.0, -2.5, 65536.0, 16777216.0, 1e16, 1e300, -1e-300,
                             std::numeric_limits<double>::min(), std::numeric_limits<double>::max(),
                             123456789.123456789, 0.30000000000000004}) {
    const Option<double> option{"x", value, "a number"};
    const double back = reread(option);
    EXPECT_TRUE(same_double(back, value)) << option.doc().default_value << " read back as " << back;
  }
  // Integral values keep a decimal point, so the doc reads as a number, not a count.
  EXPECT_EQ((Option<double>{"x", 0.0, ""}.doc().default_value), "0.0");
  EXPECT_EQ((Option<double>{"x", -0.0, ""}.doc().default_value), "-0.0");
  EXPECT_EQ((Option<double>{"x", 1e-8, ""}.doc().default_value), "1e-08");
  EXPECT_EQ((Option<double>{"x", 0.1, ""}.doc().default_value), "0.1");
}

TEST(Options, IntegerAndBooleanDefaultsReadBackAsTheSameValue) {
  for (const std::int64_t value : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{1000000000000},
                                   std::numeric_limits<std::int64_t>::max(),
                                   std::numeric_limits<std::int64_t>::min()}) {
    const Option<std::int64_t> option{"n", value, "a count"};
    EXPECT_EQ(reread(option), value) << option.doc().default_value;
  }
  for (const bool value : {true, false}) {
    const Option<bool> option{"flag", value, "a switch"};
    EXPECT_EQ(reread(option), value) << option.doc().default_value;
  }
}

TEST(Options, StringDefaultsReadBackAsTheSameString) {
  for (const std::string value :
       {"", "auto", "steps.csv", "runs/", "/usr/share/datasets/fashion-mnist", "true", "False", "yes", "off", "y",
        "null", "NULL", "~", "1.0", "12", "0x10", "1e5", ".inf", "-.inf", "nan", "-", "-x", ".hidden", "a b", " lead",
        "trail ", "a: b", "a #b", "#x", "[a]", "{a}", "a,b", "'single'", "\"double\"", "back\\slash", "line\nbreak",
        "tab\there", "bell\x01", "%x", "@x", "`x", "!x", "&x", "*x", "|", ">", "?", "caf\xc3\xa9"}) {
    const Option<std::string> option{"s", value, "a word"};
    EXPECT_EQ(reread(option), value) << "written as " << option.doc().default_value;
  }
  // Plain where that reads back the same; quoted where YAML would read something else.
  EXPECT_EQ((Option<std::string>{"s", "auto", ""}.doc().default_value), "auto");
  EXPECT_EQ((Option<std::string>{"s", "", ""}.doc().default_value), "\"\"");
  EXPECT_EQ((Option<std::string>{"s", "true", ""}.doc().default_value), "\"true\"");
}

TEST(Options, ListDefaultsReadBackAsTheSameList) {
  for (const std::vector<double>& value : std::vector<std::vector<double>>{{}, {0.9, 0.999}, {1e-8, -0.0, 3.0}}) {
    const Option<std::vector<double>> option{"betas", value, "numbers"};
    const std::vector<double> back = reread(option);
    ASSERT_EQ(back.size(), value.size()) << option.doc().default_value;
    for (std::size_t i = 0; i < value.size(); ++i) EXPECT_TRUE(same_double(back[i], value[i])) << i;
  }
  for (const std::vector<std::int64_t>& value : std::vector<std::vector<std::int64_t>>{
           {}, {3, 224, 224}, {std::numeric_limits<std::int64_t>::min(), 0}}) {
    const Option<std::vector<std::int64_t>> option{"shape", value, "integers"};
    EXPECT_EQ(reread(option), value) << option.doc().default_value;
  }
  for (const std::vector<std::string>& value :
       std::vector<std::vector<std::string>>{{}, {"a"}, {"", "true", "a, b", "]", "x: y", "-"}}) {
    const Option<std::vector<std::string>> option{"names", value, "words"};
    EXPECT_EQ(reread(option), value) << option.doc().default_value;
  }
  EXPECT_EQ((Option<std::vector<double>>{"betas", {0.9, 0.999}, ""}.doc().default_value), "[0.9, 0.999]");
  EXPECT_EQ((Option<std::vector<std::string>>{"names", {}, ""}.doc().default_value), "[]");
}

TEST(Options, AbsentKeyReadsTheFallback) {
  const Config empty = section_of("c: {}\n");
  EXPECT_EQ((Option<std::int64_t>{"every", 10, ""}.read(empty)), 10);
  EXPECT_EQ((Option<std::string>{"file", "steps.csv", ""}.read(empty)), "steps.csv");
  EXPECT_EQ((Option<std::int64_t>{"batch_size", 64, ""}.with_fallback(128).read(empty)), 128);
  EXPECT_EQ((Contextual<std::int64_t>{"num_classes", "the dataset's", ""}.read(empty, 10)), 10);
  EXPECT_FALSE((Optional<std::string>{"weights", ""}.read(empty)).has_value());
  EXPECT_EQ((Optional<std::string>{"weights", ""}.read(section_of("c: {weights: w.safetensors}\n"))),
            std::optional<std::string>("w.safetensors"));
}

// The error a read of `yaml`'s section c through `option` throws.
template <class Declaration>
Error error_of(const Declaration& option, const std::string& yaml) {
  try {
    option.read(section_of(yaml));
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << yaml;
  return runtime_error("none");
}

TEST(Options, AFailedCheckIsARecipeErrorAtTheValue) {
  const Option<double> momentum{"momentum", 0.0, "momentum factor", at_least(0)};
  const Error e = error_of(momentum, "model: {name: m}\nc:\n  name: sgd\n  momentum: -0.5\n");
  EXPECT_STREQ(e.what(), "r.yaml:4:13: c.momentum: must not be negative");
  EXPECT_EQ(e.key_path(), "c.momentum");
  EXPECT_EQ(e.exit_code(), 2);

  const Option<std::string> on_bad{"on_bad_sample", "skip", "what to do", one_of({"skip", "fail"})};
  EXPECT_STREQ(error_of(on_bad, "c: {on_bad_sample: ignore}\n").what(),
               "r.yaml:1:20: c.on_bad_sample: expected skip or fail, got \"ignore\"");
  EXPECT_STREQ(error_of(Option<std::int64_t>{"n", 1, "", at_least(1)}, "c:\n  n: 0\n").what(),
               "r.yaml:2:6: c.n: must be at least 1");
  EXPECT_STREQ(error_of(Required<double>{"lr", "", at_least(0)}, "c:\n  lr: -1\n").what(),
               "r.yaml:2:7: c.lr: must not be negative");
  // A wrong type is still Config's own error, before any check.
  EXPECT_STREQ(error_of(momentum, "c:\n  momentum: fast\n").what(),
               "r.yaml:2:13: c.momentum: expected a number, got \"fast\"");
}

TEST(Options, BoundsSayTheirRange) {
  const auto message = [](const Check<double>& check, double value) { return check.test(value).value_or("ok"); };
  EXPECT_EQ(message(at_least(0), -1), "must not be negative");
  EXPECT_EQ(message(at_least(0), 0), "ok");
  EXPECT_EQ(message(above(0), 0), "must be positive");
  EXPECT_EQ(message(above(1), 1), "must be greater than 1");
  EXPECT_EQ(message(at_least(0.5), 0.25), "must be at least 0.5");
  EXPECT_EQ(message(at_most(4), 5), "must be at most 4");
  EXPECT_EQ(message(below(1), 1), "must be less than 1");
  EXPECT_EQ(message(between(0, 1024), 1025), "must be in [0, 1024]");
  EXPECT_EQ(message(between(0, 1024), 1024), "ok");
  EXPECT_EQ(message(at_least(0) && below(1), 1), "must be in [0, 1)");
  EXPECT_EQ(message(at_least(0) && below(1), 0.999), "ok");
  EXPECT_EQ(message(above(0) && at_most(1), 0), "must be in (0, 1]");
  EXPECT_EQ(message(above(0) && at_most(1), std::nan("")), "must be in (0, 1]");  // NaN passes no bound
  const Check<std::int64_t> count = at_least(1);
  EXPECT_EQ(count.test(0).value_or("ok"), "must be at least 1");
  EXPECT_EQ(count.test(std::numeric_limits<std::int64_t>::max()).value_or("ok"), "ok");
}

TEST(Options, DocsShowDefaultsRequiredAndChoices) {
  const Option<std::string> foreach{"foreach", "auto", "the _foreach_ kernels", one_of({"auto", "true", "false"})};
  const OptionDoc doc = foreach;  // as ComponentInfo lists it
  EXPECT_EQ(doc.name, "foreach");
  EXPECT_EQ(doc.default_value, "auto");
  EXPECT_EQ(doc.help, "the _foreach_ kernels (one of: auto, true, false)");
  const OptionDoc lr = Required<double>{"lr", "learning rate"};
  EXPECT_EQ(lr.default_value, "");  // `mixt describe` shows (required)
  EXPECT_EQ(lr.help, "learning rate");
  EXPECT_EQ(OptionDoc(Contextual<bool>{"shuffle", "true for train", "reshuffle"}).default_value, "(true for train)");
  EXPECT_EQ(OptionDoc(Optional<std::string>{"weights", "a file"}).default_value, "none");
  const ComponentInfo info{"a component", {foreach, Required<double>{"lr", ""}}};
  EXPECT_EQ(info.options.size(), 2u);
}

TEST(Options, RequiredWithoutTheKeyIsTheMissingKeyError) {
  const std::string yaml = "c:\n  name: sgd\n";
  std::string expected;
  try {
    section_of(yaml).number("lr");
  } catch (const Error& e) {
    expected = e.what();
  }
  ASSERT_THAT(expected, HasSubstr("missing required option"));
  const Error e = error_of(Required<double>{"lr", "learning rate", at_least(0)}, yaml);
  EXPECT_EQ(std::string(e.what()), expected);
  EXPECT_EQ(e.key_path(), "c.lr");
  EXPECT_EQ(e.hint(), "add `lr: <a number>` to this section");
  EXPECT_THAT(std::string(error_of(Required<std::string>{"root", ""}, yaml).what()), HasSubstr("c.root: missing required"));
  EXPECT_THAT(std::string(error_of(Required<std::int64_t>{"size", ""}, yaml).what()), HasSubstr("c.size: missing required"));
}

}  // namespace
}  // namespace mixt
