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

#include "mixt/callback.h"
#include "mixt/plugin.h"
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

// The error a read of `yaml`'s section c through `option` (a declaration or an OptionsOf) throws.
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

// --- OptionsOf: a component's options as a struct ------------------------------------

enum class Mode { fast, careful };

struct Group {
  std::int64_t workers = 4;
};

struct Settings {
  double lr = 0;
  double momentum = 0.9;
  int every = 10;  // read as int64, stored as int
  std::optional<std::string> weights;
  std::optional<std::int64_t> classes;
  Mode mode = Mode::careful;
  WordOrList blocks;
  Group group;
  RecipeSection where;
};

OptionsOf<Settings> settings_options() {
  using S = Settings;
  return OptionsOf<S>()
      .required(&S::lr, "lr", "learning rate", at_least(0))
      .add(&S::momentum, "momentum", "momentum factor", at_least(0))
      .add(&S::every, "every", "steps between lines", at_least(1))
      .optional(&S::weights, "weights", "a weights file")
      .contextual(&S::classes, "classes", "the dataset's", "output classes", at_least(1))
      .choice(&S::mode, "mode", {{"fast", Mode::fast}, {"careful", Mode::careful}}, "how")
      .word_or_list(&S::blocks, "blocks", {"none", "all"}, "none", "block names", "what to recompute")
      .include(&S::group, OptionsOf<Group>().add(&Group::workers, "workers", "threads", at_least(0)))
      .recipe_section(&S::where)
      .rule("momentum", [](const S& o) -> std::optional<std::string> {
        if (o.mode == Mode::fast && o.momentum == 0) return "mode fast needs momentum";
        return std::nullopt;
      });
}

TEST(OptionsOf, FillsTheStructFromTheRecipeAndTheInitialisersElsewhere) {
  const Settings given = settings_options().read(
      section_of("c: {lr: 0.5, every: 3, weights: w.safetensors, classes: 7, mode: fast, blocks: [a, b], workers: 0}\n"));
  EXPECT_EQ(given.lr, 0.5);
  EXPECT_EQ(given.momentum, 0.9);  // not written: the initialiser
  EXPECT_EQ(given.every, 3);
  EXPECT_EQ(given.weights, std::optional<std::string>("w.safetensors"));
  EXPECT_EQ(given.classes, std::optional<std::int64_t>(7));
  EXPECT_EQ(given.mode, Mode::fast);
  EXPECT_EQ(given.blocks.word, "");
  EXPECT_EQ(given.blocks.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(given.group.workers, 0);
  EXPECT_EQ(given.where.path(), "c");

  const Settings defaults = settings_options().read(section_of("c: {lr: 1}\n"));
  EXPECT_FALSE(defaults.weights.has_value());
  EXPECT_FALSE(defaults.classes.has_value());  // the factory fills it from its context
  EXPECT_EQ(defaults.mode, Mode::careful);
  EXPECT_EQ(defaults.blocks.word, "none");
  EXPECT_TRUE(defaults.blocks.names.empty());
  EXPECT_EQ(defaults.group.workers, 4);
}

TEST(OptionsOf, DocsListEveryKeyInOrderWithTheDefaultsItReads) {
  const OptionsOf<Settings> options = settings_options();
  std::vector<std::string> rows;
  for (const OptionDoc& doc : options.docs()) rows.push_back(doc.name + "=" + doc.default_value);
  EXPECT_EQ(rows, (std::vector<std::string>{"lr=", "momentum=0.9", "every=10", "weights=none", "classes=(the dataset's)",
                                            "mode=careful", "blocks=none", "workers=4"}));
  EXPECT_EQ(options.keys(),
            (std::vector<std::string>{"lr", "momentum", "every", "weights", "classes", "mode", "blocks", "workers"}));
  // Other defaults than the initialisers, for a struct shared between components.
  Group eight;
  eight.workers = 8;
  const auto group = OptionsOf<Group>(eight).add(&Group::workers, "workers", "threads");
  EXPECT_EQ(group.docs().front().default_value, "8");
  EXPECT_EQ(group.read(section_of("c: {}\n")).workers, 8);
}

TEST(OptionsOf, EveryMistakeIsARecipeErrorAtItsKey) {
  const auto options = settings_options();
  EXPECT_STREQ(error_of(options, "c:\n  lr: -1\n").what(), "r.yaml:2:7: c.lr: must not be negative");
  EXPECT_STREQ(error_of(options, "c:\n  lr: 1\n  mode: quick\n").what(),
               "r.yaml:3:9: c.mode: expected fast or careful, got \"quick\"");
  EXPECT_STREQ(error_of(options, "c:\n  lr: 1\n  workers: -2\n").what(),
               "r.yaml:3:12: c.workers: must not be negative");
  // A rule relating two options fails at its key once both are read.
  EXPECT_STREQ(error_of(options, "c:\n  lr: 1\n  momentum: 0\n  mode: fast\n").what(),
               "r.yaml:3:13: c.momentum: mode fast needs momentum");
  const Error word = error_of(options, "c:\n  lr: 1\n  blocks: some\n");
  EXPECT_STREQ(word.what(), "r.yaml:3:11: c.blocks: expected none, all or a list of block names, got 'some'");
  EXPECT_EQ(word.hint(), "write [some] for a list of one");
  EXPECT_THAT(error_of(options, "c:\n  lr: 1\n  blocks: [a, '']\n").what(), HasSubstr("an empty name"));
  EXPECT_THAT(error_of(options, "c: {}\n").what(), HasSubstr("c.lr: missing required option"));
}

TEST(OptionsOf, RefusedKeysAreErrorsOnlyWhereWrittenAndWhenTheyApply) {
  struct Scaling {
    bool dynamic = true;
    double growth = 2.0;
  };
  const auto options = OptionsOf<Scaling>()
                           .choice(&Scaling::dynamic, "mode", {{"dynamic", true}, {"static", false}}, "")
                           .refuse({"growth"}, "only used with mode: dynamic", "remove it",
                                   [](const Scaling& so_far) { return !so_far.dynamic; })
                           .add(&Scaling::growth, "growth", "", above(1));
  EXPECT_EQ(options.read(section_of("c: {mode: dynamic, growth: 3.0}\n")).growth, 3.0);
  EXPECT_FALSE(options.read(section_of("c: {mode: static}\n")).dynamic);
  // Refused before its own check: the bad value is not the point when the key is not used.
  const Error refused = error_of(options, "c:\n  mode: static\n  growth: 0.5\n");
  EXPECT_STREQ(refused.what(), "r.yaml:3:11: c.growth: only used with mode: dynamic");
  EXPECT_EQ(refused.hint(), "remove it");
}

TEST(OptionsOf, ARecipeSectionReportsAtItsKeysAndKnowsWhatWasWritten) {
  const Settings o = settings_options().read(section_of("c:\n  lr: 1\n  weights: w.bin\n"));
  EXPECT_TRUE(o.where.given("weights"));
  EXPECT_FALSE(o.where.given("momentum"));  // read with its default, not written
  try {
    o.where.fail("weights", "no such file", "check the path");
    ADD_FAILURE() << "fail() returned";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "r.yaml:3:12: c.weights: no such file");
    EXPECT_EQ(e.hint(), "check the path");
    EXPECT_EQ(e.exit_code(), 2);
  }
  try {
    o.where.fail_missing("root");
    ADD_FAILURE() << "fail_missing() returned";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("c.root: missing required option"));
  }
}

// The registrar hands the factory its options read and checked, and lists the same docs.
class RecordingRegistrar : public Registrar {
 public:
  ComponentInfo info;
  CallbackFactory callback;

 protected:
  void register_model(const std::string&, ComponentInfo, ModelFactory) override {}
  void register_optimizer(const std::string&, ComponentInfo, OptimizerFactory) override {}
  void register_scheduler(const std::string&, ComponentInfo, SchedulerFactory) override {}
  void register_precision(const std::string&, ComponentInfo, PrecisionFactory) override {}
  void register_dataset(const std::string&, ComponentInfo, DatasetFactory) override {}
  void register_callback(const std::string&, ComponentInfo given, CallbackFactory factory) override {
    info = std::move(given);
    callback = std::move(factory);
  }
  void register_task(const std::string&, ComponentInfo, TaskFactory) override {}
  void register_transformers_config(const std::string&, TransformersConfig) override {}
  void register_onnx_translation(const std::string&, std::string, OnnxTranslator) override {}
  void register_transformers_defaults(const std::string&, TransformersDefaults) override {}
  void register_adapter(const std::string&, ComponentInfo, AdapterFactory) override {}
};

TEST(OptionsOf, TheRegistrarGivesTheFactoryTheFilledStruct) {
  RecordingRegistrar registrar;
  Settings seen;
  registrar.add_callback(
      "recorder", "records its options", settings_options(),
      [&seen](const Settings& o, const CallbackContext&) -> std::unique_ptr<Callback> {
        seen = o;
        return nullptr;
      },
      WhenUnlisted::on);
  EXPECT_EQ(registrar.info.summary, "records its options");
  EXPECT_TRUE(registrar.info.enabled_by_default);
  ASSERT_EQ(registrar.info.options.size(), settings_options().keys().size());
  EXPECT_EQ(registrar.info.options[1].default_value, "0.9");
  registrar.callback(section_of("c: {lr: 0.25, mode: fast}\n"), CallbackContext{});
  EXPECT_EQ(seen.lr, 0.25);
  EXPECT_EQ(seen.mode, Mode::fast);
  // The factory never runs on a recipe its options refuse.
  seen.lr = -7;
  EXPECT_THROW(registrar.callback(section_of("c: {lr: -1}\n"), CallbackContext{}), Error);
  EXPECT_EQ(seen.lr, -7);
}

}  // namespace
}  // namespace mixt
