// End to end: the real `mixt` binary on real (small) data, and every kind of bad input
// answered with one clear message and exit code 2 — never a raw library message, an
// abort or a core dump.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "run_directories.h"
#include "test_support.h"

namespace mixt {
namespace {

using testing::only_run_directory;

const std::string kFixtures = testing::configured::fixture_plugin_dir();

void expect_clean_failure(const CommandResult& result, const std::string& expected) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt: error: " + expected));
  EXPECT_THAT(result.output, Not(HasSubstr("terminate called")));
  EXPECT_THAT(result.output, Not(HasSubstr("Exception raised from")));
  EXPECT_THAT(result.output, Not(HasSubstr("what():")));
}

// The tiny recipe under the test fixture policy `fixture_inf_injection` with `options`
// (tests/fixtures/plugins/inf_injection.cpp), loaded through the recipe's plugins:.
void write_fixture_policy_recipe(const TempDir& dir, const std::string& file, const std::string& options) {
  const std::string recipe =
      testing::replace_once(kTinyRecipe, "{ name: fp32 }", "{ name: fixture_inf_injection, " + options + " }");
  dir.write(file, "plugins: [" + kFixtures + "/libmixt_fixture_inf_injection.so]\n" + recipe);
}

CommandResult check_recipe(const TempDir& dir, const std::string& text, std::vector<std::string> extra = {}) {
  dir.write("r.yaml", text);
  std::vector<std::string> args = {"check", "r.yaml"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_mixt(args, dir.path());
}

TEST(Cli, VersionNamesMixtLibTorchAndCuda) {
  const CommandResult result = run_mixt({"--version"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.output, HasSubstr("mixt 0.1.0"));
  EXPECT_THAT(result.output, HasSubstr("LibTorch 2.11.0"));
  EXPECT_THAT(result.output, HasSubstr("CUDA"));
}

// The Containerfile names the image in MIXT_CONTAINER_IMAGE; outside an image nothing is said.
TEST(Cli, VersionNamesTheContainerImageItRunsIn) {
  EXPECT_THAT(run_mixt({"--version"}, fs::current_path(), "MIXT_CONTAINER_IMAGE='mixt:0.1.0 (abc123)'").output,
              HasSubstr("\ncontainer image: mixt:0.1.0 (abc123)\n"));
  EXPECT_THAT(run_mixt({"--version"}).output, Not(HasSubstr("container image")));
}

// MIXT_HOST_ALLOCATOR (common/host_allocator.h): applied before anything else, and said.
TEST(Cli, VersionSaysWhichHostAllocatorRunsAndAnUnknownOneIsExitTwo) {
  const std::string lean = "host allocator: lean (blocks >= 8 MiB unmapped on free)\n";
  EXPECT_THAT(run_mixt({"--version"}).output, HasSubstr(lean));
  EXPECT_THAT(run_mixt({"--version"}, fs::current_path(), "MIXT_HOST_ALLOCATOR=lean").output, HasSubstr(lean));
  EXPECT_THAT(run_mixt({"--version"}, fs::current_path(), "MIXT_HOST_ALLOCATOR=system").output,
              HasSubstr("host allocator: system (glibc malloc as it comes)\n"));
  EXPECT_THAT(run_mixt({"--version"}, fs::current_path(), "THP_MEM_ALLOC_ENABLE=1").output,
              HasSubstr("host allocator: lean (blocks >= 8 MiB unmapped on free, transparent huge pages)\n"));
  const CommandResult typo = run_mixt({"--version"}, fs::current_path(), "MIXT_HOST_ALLOCATOR=laen");
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_THAT(typo.output, HasSubstr("mixt: error: MIXT_HOST_ALLOCATOR=laen: unknown setting"));
  EXPECT_THAT(typo.output, HasSubstr("did you mean 'lean'?"));
}

TEST(Cli, HelpEverywhereAndBadUsageIsExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"}, {"run", "--help"}, {"check", "--help"}, {"list", "--help"},
                                             {"describe", "--help"}}) {
    const CommandResult result = run_mixt(args);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_THAT(result.output, HasSubstr("Usage"));
  }
  const CommandResult bare = run_mixt({});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_THAT(bare.output, HasSubstr("Subcommands:"));  // the help, not "required"
  EXPECT_EQ(run_mixt({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(run_mixt({"run"}).exit_code, 2);
}

// Bad command lines in mixt's error format, with what was most likely meant (CLI11 alone
// said "A subcommand is required" to `mixt chek`).
TEST(Cli, ABadCommandLineSaysWhatWasMeant) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"chek", "r.yaml"}, "mixt: error: unknown command 'chek'\n  hint: did you mean 'check'?"},
      {{"run", "r.yaml", "--epochs", "2"}, "  hint: recipe settings are key=value overrides, without dashes"},
      {{"run"}, "mixt: error: recipe is required\n  hint: mixt run --help shows its usage"},
      {{"bench", "r.yaml", "--steps", "1.5"},
       "mixt: error: --steps: expected a whole number, got '1.5'\n  hint: mixt bench --help"},
  };
  for (const auto& [args, expected] : cases) {
    const CommandResult result = run_mixt(args);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output, HasSubstr(expected));
    EXPECT_THAT(result.output, Not(HasSubstr("Run with --help")));
  }
}

TEST(Cli, ListAndDescribe) {
  const CommandResult list = run_mixt({"list"});
  EXPECT_EQ(list.exit_code, 0);
  for (const char* name : {"simple_cnn", "sgd", "adamw", "fp32", "fashion_mnist", "libmixt_optimizer_sgd.so"}) {
    EXPECT_THAT(list.output, HasSubstr(name)) << name << "\n" << list.output;
  }
  const CommandResult optimizers = run_mixt({"list", "optimizer", "s*"});
  EXPECT_THAT(optimizers.output, HasSubstr("sgd"));
  EXPECT_THAT(optimizers.output, Not(HasSubstr("adamw")));
  EXPECT_EQ(run_mixt({"list", "optimizers", "s*"}).output, optimizers.output);  // the plural reads the same
  EXPECT_EQ(run_mixt({"list", "models"}).output, run_mixt({"list", "model"}).output);

  const CommandResult describe = run_mixt({"describe", "optimizer", "sgd"});
  EXPECT_EQ(describe.exit_code, 0);
  EXPECT_THAT(describe.output, HasSubstr("momentum"));
  EXPECT_THAT(describe.output, HasSubstr("(required)"));
  // The options mixt reads for every model and every policy, whatever the plugin lists.
  const CommandResult cnn = run_mixt({"describe", "model", "simple_cnn"});
  EXPECT_THAT(cnn.output, HasSubstr("\n  weights                none "));
  EXPECT_THAT(cnn.output, HasSubstr("\n  strict                 true "));
  const CommandResult bf16 = run_mixt({"describe", "precision", "amp_bf16"});
  EXPECT_THAT(bf16.output, HasSubstr("\n  fp32_modules           [] "));

  // The trainer's options too (no plugin, no name).
  const CommandResult trainer = run_mixt({"describe", "trainer"});
  EXPECT_EQ(trainer.exit_code, 0) << trainer.output;
  EXPECT_THAT(trainer.output, HasSubstr("  keep_checkpoints "));
  EXPECT_THAT(trainer.output, HasSubstr("  distributed.sync_batchnorm false"));
  expect_clean_failure(run_mixt({"describe", "optimizer"}), "mixt describe optimizer needs a name");

  const CommandResult unknown = run_mixt({"describe", "optimizer", "sdg"});
  expect_clean_failure(unknown, "unknown optimizer 'sdg'");
  EXPECT_THAT(unknown.output, HasSubstr("did you mean 'sgd'?"));
  EXPECT_THAT(unknown.output, HasSubstr("when its .so (or its directory) is on MIXT_PLUGIN_PATH"))
      << unknown.output;
  const CommandResult misspelt = run_mixt({"list", "modle"});
  expect_clean_failure(misspelt, "no component kind or name matches 'modle'");
  EXPECT_THAT(misspelt.output, HasSubstr("did you mean 'model'?"));

  // One argument that is no kind is a name pattern over every kind.
  const CommandResult by_name = run_mixt({"list", "*sgd"});
  EXPECT_EQ(by_name.exit_code, 0) << by_name.output;
  EXPECT_THAT(by_name.output, HasSubstr("optimizer:\n  sgd "));
  EXPECT_THAT(by_name.output, Not(HasSubstr("adamw")));
}

TEST(Cli, CheckAcceptsTheShippedRecipe) {
  const CommandResult result = run_mixt({"check", testing::configured::source_dir() + "/recipes/fashion_mnist.yaml"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr(": ok"));
  // Fashion-MNIST's published sizes; 60000 / 128 rounded up; the recipe's simple_cnn
  // counted by hand: conv 1->32 (320) + conv 32->64 (18496) + linear 64*7*7->128 (401536)
  // + linear 128->10 (1290).
  EXPECT_THAT(result.output, HasSubstr("data.train 60000 samples, 10 classes, each [1, 28, 28]; 469 batches per epoch"))
      << result.output;
  EXPECT_THAT(result.output, HasSubstr("data.val   10000 samples, 10 classes, each [1, 28, 28]; 10 batches per epoch"))
      << result.output;
  EXPECT_THAT(result.output, HasSubstr("model     421,642 parameters"));
  // simple_cnn routes its two halves, the first as a block (models/simple_cnn/simple_cnn.cpp).
  EXPECT_THAT(result.output, HasSubstr("  routed    2 through mixt::call_submodule: features, classifier\n"
                                       "  blocks    1 through mixt::call_block: features\n"
                                       "  recompute none (trainer.activation_checkpointing)\n"
                                       "  fp32      none (precision.fp32_modules)\n"
                                       "  steps     469 optimizer steps per epoch (469 batches), 5 epochs\n"))
      << result.output;
}

// What the recipe recomputes, keeps in float32, and how many optimizer steps an epoch has
// once accumulation and max_steps_per_epoch apply (it said 469 batches and nothing else).
TEST(Cli, CheckSaysWhatIsRecomputedKeptInFloat32AndTheStepsPerEpoch) {
  const CommandResult all = run_mixt({"check", testing::configured::source_dir() + "/recipes/fashion_mnist.yaml",
                                      "trainer.activation_checkpointing=all", "precision.fp32_modules=[classifier]",
                                      "trainer.accumulate=2", "trainer.max_steps_per_epoch=100"});
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_THAT(all.output, HasSubstr("  recompute features (trainer.activation_checkpointing)\n"
                                    "  fp32      classifier (precision.fp32_modules)\n"
                                    "  steps     100 optimizer steps per epoch (469 batches, 2 per step "
                                    "(trainer.accumulate), at most 100 (trainer.max_steps_per_epoch)), 5 epochs\n"))
      << all.output;
  // ceil(469 / 2) = 235 when nothing caps it.
  const CommandResult accumulated =
      run_mixt({"check", testing::configured::source_dir() + "/recipes/fashion_mnist.yaml", "trainer.accumulate=2",
                "trainer.epochs=1", "trainer.activation_checkpointing=[classifier]"});
  ASSERT_EQ(accumulated.exit_code, 0) << accumulated.output;
  EXPECT_THAT(accumulated.output, HasSubstr("  recompute classifier (trainer.activation_checkpointing)\n"));
  EXPECT_THAT(accumulated.output,
              HasSubstr("  steps     235 optimizer steps per epoch (469 batches, 2 per step (trainer.accumulate)), 1 epoch\n"));
  // A submodule the model has but does not route: the hint offers only what it routes.
  const CommandResult unrouted = run_mixt({"check", testing::configured::source_dir() + "/recipes/fashion_mnist.yaml",
                                           "precision.fp32_modules=[classifier.0]"});
  EXPECT_EQ(unrouted.exit_code, 2) << unrouted.output;
  EXPECT_THAT(unrouted.output, HasSubstr("the submodules it routes: classifier, features")) << unrouted.output;
}

// --- bad input, one test each -------------------------------------------------------

// Switching a component from the command line: key=null drops the old one's options (it
// was "unknown key 'momentum'"), and a whole map replaces the section.
TEST(Cli, ANullOverrideDropsAnOptionTheNewComponentDoesNotHave) {
  TempDir dir;
  const CommandResult kept = check_recipe(dir, kTinyRecipe, {"optimizer.name=adamw"});
  EXPECT_EQ(kept.exit_code, 2) << kept.output;
  EXPECT_THAT(kept.output, HasSubstr("unknown key 'momentum' in 'optimizer'"));
  const CommandResult dropped = check_recipe(dir, kTinyRecipe, {"optimizer.name=adamw", "optimizer.momentum=null"});
  EXPECT_EQ(dropped.exit_code, 0) << dropped.output;
  const CommandResult replaced = check_recipe(dir, kTinyRecipe, {"optimizer={name: adamw, lr: 0.001}"});
  EXPECT_EQ(replaced.exit_code, 0) << replaced.output;
  const CommandResult deleted = check_recipe(dir, kTinyRecipe, {"optimizer={_delete_: true, name: adamw, lr: 0.001}"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.output;
}

TEST(CliBadInput, YamlSyntaxError) {
  TempDir dir;
  const auto result = check_recipe(dir, "model: {name: simple_cnn\ntrainer: {epochs: 1}\n");
  expect_clean_failure(result, "r.yaml:");
  EXPECT_THAT(result.output, HasSubstr("YAML syntax error"));
}

TEST(CliBadInput, WrongType) {
  TempDir dir;
  const std::string recipe = testing::replace_once(kTinyRecipe, "lr: 0.05", "lr: fast");
  // Line 4, column 29: counted in kTinyRecipe by hand.
  expect_clean_failure(check_recipe(dir, recipe), "r.yaml:4:29: optimizer.lr: expected a number, got \"fast\"");
}

TEST(CliBadInput, UnknownKey) {
  TempDir dir;
  const std::string recipe = testing::replace_once(kTinyRecipe, "momentum", "momentun");
  const auto result = check_recipe(dir, recipe);
  expect_clean_failure(result, "r.yaml:4:35: optimizer.momentun: unknown key 'momentun' in 'optimizer'");
  EXPECT_THAT(result.output, HasSubstr("did you mean 'momentum'?"));
}

// Since ABI 6 the loss's options belong to the task: the old key says where it went.
TEST(CliBadInput, LabelSmoothingUnderTrainerSaysItMovedToTheTask) {
  TempDir dir;
  const std::string recipe = testing::replace_once(kTinyRecipe, "threads: 1,", "threads: 1, label_smoothing: 0.1,");
  const auto result = check_recipe(dir, recipe);
  // Line 8, column 61 (the value): counted in kTinyRecipe by hand.
  expect_clean_failure(result, "r.yaml:8:61: trainer.label_smoothing: label smoothing is an option of the task");
  EXPECT_THAT(result.output, HasSubstr("task: {name: classification, label_smoothing: 0.1}"));
  const std::string moved = testing::replace_once(kTinyRecipe, "output: runs",
                                                  "task: {name: classification, label_smoothing: 0.1}\noutput: runs");
  EXPECT_EQ(check_recipe(dir, moved).exit_code, 0) << check_recipe(dir, moved).output;
}

TEST(CliBadInput, UnknownComponent) {
  TempDir dir;
  const std::string recipe = testing::replace_once(kTinyRecipe, "simple_cnn", "simple_ccn");
  const auto result = check_recipe(dir, recipe);
  expect_clean_failure(result, "r.yaml:2:20: model.name: unknown model 'simple_ccn'");
  EXPECT_THAT(result.output, HasSubstr("did you mean 'simple_cnn'?"));
  EXPECT_THAT(result.output, HasSubstr("needs its .so in the recipe's plugins: list"));
}

TEST(CliBadInput, MissingBaseFile) {
  TempDir dir;
  expect_clean_failure(check_recipe(dir, "base: base/missing.yaml\n" + kTinyRecipe),
                       "r.yaml:1:7: base: base file not found: ");
}

TEST(CliBadInput, BaseCycle) {
  TempDir dir;
  dir.write("other.yaml", "base: r.yaml\n");
  const auto result = check_recipe(dir, "base: other.yaml\n" + kTinyRecipe);
  expect_clean_failure(result, "other.yaml:1:7: base: cycle: r.yaml -> other.yaml -> r.yaml");
}

TEST(CliBadInput, OverrideOfAKeyThatDoesNotExist) {
  TempDir dir;
  const auto result = check_recipe(dir, kTinyRecipe, {"trainer.epoch=3"});
  expect_clean_failure(result, "command line 'trainer.epoch=3': trainer.epoch: unknown key 'epoch' in 'trainer'");
  EXPECT_THAT(result.output, HasSubstr("did you mean 'epochs'?"));
}

// At its place in the recipe, as written, and where it was looked for when that differs.
TEST(CliBadInput, PluginPathThatDoesNotExist) {
  TempDir dir;
  expect_clean_failure(check_recipe(dir, "plugins: [plugins/libnothing.so]\n" + kTinyRecipe),
                       "r.yaml:1:11: plugins[0]: plugin 'plugins/libnothing.so' does not exist");
  dir.write("shared/base.yaml", "plugins: [libnothing.so]\n");
  expect_clean_failure(check_recipe(dir, "base: shared/base.yaml\n" + kTinyRecipe),
                       "shared/base.yaml:1:11: plugins[0]: plugin 'libnothing.so' does not exist (looked for "
                       "shared/libnothing.so)");
}

TEST(CliBadInput, PluginThatIsNotASharedLibrary) {
  TempDir dir;
  expect_clean_failure(check_recipe(dir, "plugins: [" + kFixtures + "/libmixt_fixture_text.so]\n" + kTinyRecipe),
                       kFixtures + "/libmixt_fixture_text.so: not a loadable shared library");
}

TEST(CliBadInput, SharedLibraryThatIsNotAPlugin) {
  TempDir dir;
  expect_clean_failure(check_recipe(dir, "plugins: [" + kFixtures + "/libfixture_not_a_plugin.so]\n" + kTinyRecipe),
                       kFixtures + "/libfixture_not_a_plugin.so: not a mixt plugin");
}

TEST(CliBadInput, PluginBuiltForAnotherAbi) {
  TempDir dir;
  const auto result = check_recipe(dir, "plugins: [" + kFixtures + "/libmixt_fixture_wrong_abi.so]\n" + kTinyRecipe);
  expect_clean_failure(result, kFixtures + "/libmixt_fixture_wrong_abi.so: incompatible plugin: built for plugin ABI");
  EXPECT_THAT(result.output, HasSubstr("hint: rebuild the plugin against mixt 0.1.0"));
}

TEST(CliBadInput, TwoPluginsRegisteringTheSameName) {
  TempDir dir;
  const auto result = check_recipe(dir, "plugins: [" + kFixtures + "/libmixt_fixture_duplicate.so]\n" + kTinyRecipe);
  expect_clean_failure(result, kFixtures + "/libmixt_fixture_duplicate.so: optimizer 'sgd' is registered twice");
  EXPECT_THAT(result.output, HasSubstr("libmixt_optimizer_sgd.so"));
}

TEST(CliBadInput, FactoryThatThrows) {
  TempDir dir;
  const std::string recipe = testing::replace_once(kTinyRecipe, "{ name: simple_cnn, channels: [8, 16], hidden: 32 }",
                                                   "{ name: exploding_model }");
  const auto result = check_recipe(dir, "plugins: [" + kFixtures + "/libmixt_fixture_throwing_factory.so]\n" + recipe);
  expect_clean_failure(result, kFixtures + "/libmixt_fixture_throwing_factory.so: model 'exploding_model' (plugin "
                                           "'fixture_throwing_factory') failed to build: boom: out of coffee");
}

// A Ctrl-C while the run is being set up (here: while the precision policy is built)
// stops before anything is written. It used to wait for setup, train one step and write
// a run directory with an `interrupted` checkpoint of that one step.
TEST(CliRun, AnInterruptDuringSetupStopsBeforeAnythingIsWritten) {
  TempDir dir;
  write_fixture_policy_recipe(dir, "r.yaml", "interrupt_at_setup: true");
  const CommandResult result = run_mixt({"run", "r.yaml"}, dir.path());
  EXPECT_EQ(result.exit_code, 130) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt: stopping before training starts (again to quit at once)"))
      << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt: interrupted before training started; nothing was written"))
      << result.output;
  EXPECT_FALSE(fs::exists(dir.path() / "runs")) << result.output;
}

// Out of GPU memory (LibTorch's OutOfMemoryError, thrown here by a fixture policy at its
// first optimizer step) is one line and what to change, not a raw LibTorch message.
TEST(CliRun, OutOfMemorySaysWhatToChange) {
  TempDir dir;
  write_fixture_policy_recipe(dir, "oom.yaml", "oom_step: 1");
  const CommandResult result = run_mixt({"run", "oom.yaml"}, dir.path());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt: error: out of memory: CUDA out of memory. Tried to allocate 2.00 GiB."))
      << result.output;
  EXPECT_THAT(result.output, HasSubstr("hint: lower data.train.batch_size"));
  EXPECT_THAT(result.output, Not(HasSubstr("Exception raised from")));
}

// The model is built for the training samples: validation data it cannot take is found
// before training, not after the first epoch.
TEST(CliBadInput, ValidationDataTheModelCannotTake) {
  TempDir dir;
  const std::string val = "val:   { name: fashion_mnist, split: test, batch_size: 256, limit: 512 }";
  expect_clean_failure(
      check_recipe(dir, testing::replace_once(kTinyRecipe, val, "val: { name: synthetic, shape: [1, 32, 32], "
                                                                "num_classes: 10, size: 8, batch_size: 4 }")),
      "r.yaml:7:16: data.val.name: the model, built for the training samples [1, 28, 28], cannot take the "
      "validation samples [1, 32, 32]: ");
  expect_clean_failure(
      check_recipe(dir, testing::replace_once(kTinyRecipe, val, "val: { name: synthetic, shape: [1, 28, 28], "
                                                                "num_classes: 20, size: 8, batch_size: 4 }")),
      "r.yaml:7:16: data.val.name: the validation data has 20 classes, the training data 10");
}

// Fashion-MNIST has 10 classes: a model with 3 outputs failed at the first step ("Target 3
// is out of bounds") after the run directory was written; `mixt check` alone caught it.
TEST(CliBadInput, AModelWithOutputsForOtherClassesStopsBeforeTheRunStarts) {
  TempDir dir;
  dir.write("tiny.yaml", kTinyRecipe);
  expect_clean_failure(run_mixt({"run", "tiny.yaml", "model.num_classes=3"}, dir.path()),
                       "command line 'model.num_classes=3': model.num_classes: the model's output for a batch of 2 "
                       "samples has shape [2, 3], expected [2, 10]: one row per sample, one logit per class of the "
                       "training data (10)\n  hint: drop model.num_classes");
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));
}

// A plugin model that returns the wrong number of rows passed `mixt check` and failed at
// the first step with the loss's "Expected input batch_size (256) to match target
// batch_size (128)", which names no model; the hint was about model.num_classes.
TEST(CliBadInput, AModelWhoseOutputHasTheWrongBatchSizeStopsBeforeTheRunStarts) {
  TempDir dir;
  const CommandResult result =
      check_recipe(dir, "plugins: [" + kFixtures + "/libmixt_fixture_doubled_batch.so]\n" + kTinyRecipe,
                   {"model={name: fixture_doubled_batch}"});
  expect_clean_failure(result,
                       "command line 'model={name: fixture_doubled_batch}': model.name: the model's output for a "
                       "batch of 2 samples has shape [4, 10], expected [2, 10]");
  EXPECT_THAT(result.output, HasSubstr("hint: the recipe's task (classification) decides the output a model must give"))
      << result.output;
}

// A batch larger than the data with drop_last: a run of zero steps used to end "done".
TEST(CliBadInput, DataThatGivesNoBatch) {
  TempDir dir;
  expect_clean_failure(check_recipe(dir, kTinyRecipe, {"data.train.batch_size=2048", "data.train.drop_last=true"}),
                       "command line 'data.train.batch_size=2048': data.train.batch_size: data.train gives no batch "
                       "per epoch (1024 samples)");
}

TEST(CliBadInput, ARunNameThatIsNotOneDirectory) {
  TempDir dir;
  for (const std::string name : {"..", "a/b", "\"\""}) {
    expect_clean_failure(check_recipe(dir, kTinyRecipe, {"name=" + name}),
                         "command line 'name=" + name + "': name: '");
  }
  const CommandResult result = check_recipe(dir, kTinyRecipe, {"name=.."});
  EXPECT_THAT(result.output, HasSubstr("'..' is not a run name: runs go to <output>/<name>/<timestamp>/"))
      << result.output;
}

TEST(CliBadInput, AnOutputThatIsAFile) {
  TempDir dir;
  expect_clean_failure(check_recipe(dir, kTinyRecipe, {"output=r.yaml"}),
                       "command line 'output=r.yaml': output: 'r.yaml' is a file, not a directory");
}

TEST(CliBadInput, DatasetRootThatDoesNotExist) {
  TempDir dir;
  const std::string recipe = testing::replace_once(kTinyRecipe, "split: train,", "root: /no/such/dir,");
  expect_clean_failure(check_recipe(dir, recipe),
                       "r.yaml:6:39: data.train.root: dataset root does not exist: /no/such/dir");
}

TEST(CliBadInput, RecipeFileThatDoesNotExist) {
  TempDir dir;
  expect_clean_failure(run_mixt({"run", "nope.yaml"}, dir.path()), "nope.yaml: recipe file not found");
}

// --- real runs -------------------------------------------------------------------------

TEST(CliRun, TrainsWritesTheRunDirectoryAndResumes) {
  TempDir dir;
  dir.write("tiny.yaml", kTinyRecipe);
  const CommandResult result = run_mixt({"run", "tiny.yaml"}, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("test accuracy: "));
  EXPECT_THAT(result.output, HasSubstr("epoch 2/2: val loss"));

  const fs::path run = only_run_directory(dir.path() / "runs" / "tiny");
  ASSERT_TRUE(fs::exists(run / "recipe.yaml"));
  ASSERT_TRUE(fs::exists(run / "checkpoints" / "last"));
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "epoch-0001"));
  EXPECT_TRUE(fs::exists(run / "log.txt"));
  // metrics.jsonl: one JSON object per line; 16 steps per epoch, logged every 4.
  std::istringstream metrics(testing::read_file(run / "metrics.jsonl"));
  int steps = 0, epochs = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["event"] == "step") ++steps;
    if (record["event"] == "epoch") {
      ++epochs;
      EXPECT_GT(record["val_top1"].get<double>(), 0.3);  // 10 classes: chance is 0.1
    }
  }
  EXPECT_EQ(steps, 8);
  EXPECT_EQ(epochs, 2);

  // The resolved recipe is itself a valid recipe.
  const CommandResult check = run_mixt({"check", (run / "recipe.yaml").string()}, dir.path());
  EXPECT_EQ(check.exit_code, 0) << check.output;

  // Resume: one more epoch from the last checkpoint.
  const CommandResult resumed =
      run_mixt({"run", "tiny.yaml", "trainer.epochs=3", "trainer.resume=" + run.string()}, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("resumed from"));
  EXPECT_THAT(resumed.output, HasSubstr("epoch 3/3: val loss"));
  EXPECT_THAT(resumed.output, Not(HasSubstr("epoch 1/3: val loss")));

  // The output directory is not a run directory: the error points at the newest run in it.
  const CommandResult wrong = run_mixt({"export", "runs", "-o", "w.safetensors"}, dir.path());
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_THAT(wrong.output, HasSubstr("mixt: error: runs: checkpoint: no checkpoint found"));
  EXPECT_THAT(wrong.output, HasSubstr("did you mean runs/tiny/"));

  // A resume that cannot work fails before a run directory is made (an empty one would be
  // the newest run the next `trainer.resume=runs/...` hint pointed at), and `mixt check`
  // finds a path without a checkpoint, located on the command line.
  const auto runs_made = [&] {
    return std::distance(fs::directory_iterator(dir.path() / "runs" / "tiny"), fs::directory_iterator());
  };
  const auto before = runs_made();
  const CommandResult misfit =
      run_mixt({"run", "tiny.yaml", "model.channels=[4,16]", "trainer.resume=" + run.string()}, dir.path());
  expect_clean_failure(misfit, "");
  EXPECT_THAT(misfit.output, HasSubstr("checkpoint does not fit this recipe's model"));
  const CommandResult nowhere = run_mixt({"run", "tiny.yaml", "trainer.resume=runs"}, dir.path());
  expect_clean_failure(nowhere, "command line 'trainer.resume=runs': trainer.resume: no checkpoint found in 'runs'");
  EXPECT_EQ(runs_made(), before);
  expect_clean_failure(run_mixt({"check", "tiny.yaml", "trainer.resume=runs"}, dir.path()),
                       "command line 'trainer.resume=runs': trainer.resume: no checkpoint found in 'runs'");

  // trainer.epochs is the total: asking for 1 after 2 trains nothing, and says so.
  const CommandResult nothing =
      run_mixt({"run", "tiny.yaml", "trainer.epochs=1", "trainer.resume=" + run.string()}, dir.path());
  EXPECT_EQ(nothing.exit_code, 0) << nothing.output;
  EXPECT_THAT(nothing.output, HasSubstr("mixt: warning: the checkpoint has finished 2 epochs and trainer.epochs (the total, "
                                "not how many more) is 1: nothing left to train"))
      << nothing.output;
}

// Starts mixt in `dir` without waiting for it; stdout and stderr go to files there (the same
// file for both when the names are equal). `ignore_sigint`: as a shell starts a background job.
pid_t start_mixt(const TempDir& dir, std::vector<std::string> args, const std::string& out, const std::string& err,
                 bool ignore_sigint = false) {
  args.insert(args.begin(), "mixt");
  const char* mixt = testing::configured::mixt_executable().c_str();  // nothing to allocate after fork
  const pid_t child = ::fork();
  if (child == 0) {
    if (::chdir(dir.path().c_str()) != 0) ::_exit(99);
    // Whatever ctest was started with (a background job ignores SIGINT), as asked.
    ::signal(SIGINT, ignore_sigint ? SIG_IGN : SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = err == out ? out_fd : ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execv(mixt, argv.data());
    ::_exit(98);
  }
  return child;
}

// Polls `file` until it contains `text` (true) or two minutes pass (false).
bool wait_for_text(const fs::path& file, const std::string& text) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (testing::read_file(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Without validation data an epoch still leaves its line in log.txt and its "epoch" event
// in metrics.jsonl (both were written only after an evaluation: log.txt stayed empty).
TEST(CliRun, AnEpochWithoutValidationIsStillLogged) {
  TempDir dir;
  dir.write("tiny.yaml", kTinyRecipe);
  const CommandResult result =
      run_mixt({"run", "tiny.yaml", "data.val=null", "trainer.max_steps_per_epoch=2"}, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const fs::path run = only_run_directory(dir.path() / "runs" / "tiny");
  const std::string log = testing::read_file(run / "log.txt");
  EXPECT_THAT(log, HasSubstr("epoch 1/2 done"));
  EXPECT_THAT(log, HasSubstr("epoch 2/2 done"));
  std::istringstream metrics(testing::read_file(run / "metrics.jsonl"));
  std::vector<nlohmann::json> epochs;
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["event"] == "epoch") epochs.push_back(record);
  }
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[1]["epoch"], 2);
  EXPECT_EQ(epochs[1]["step"], 4);  // two steps per epoch
  EXPECT_FALSE(epochs[1].contains("val_loss"));
}

// `plugins:` paths are relative to the file that names them, as base: paths are: a shared
// base in another directory keeps its plugins (they were read against the directory of the
// recipe named on the command line). An override's are relative to the working directory,
// and the run directory's recipe.yaml names them absolutely, so it re-runs from anywhere.
TEST(CliRun, PluginPathsAreRelativeToTheFileThatNamesThem) {
  TempDir dir;
  fs::create_directories(dir.path() / "shared" / "lib");
  fs::copy_file(kFixtures + "/libmixt_fixture_good.so", dir.path() / "shared" / "lib" / "libmixt_fixture_good.so");
  dir.write("shared/base.yaml", "plugins: [lib/libmixt_fixture_good.so]\n" +
                                    testing::replace_once(kTinyRecipe, "{ name: fp32 }", "{ name: fixture_policy }"));
  dir.write("experiments/short.yaml", "base: ../shared/base.yaml\ntrainer: { epochs: 1, max_steps_per_epoch: 2 }\n");

  const CommandResult run = run_mixt({"run", "experiments/short.yaml", "data.val=null"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path recipe = only_run_directory(dir.path() / "runs" / "tiny") / "recipe.yaml";
  EXPECT_THAT(testing::read_file(recipe), HasSubstr(fs::canonical(dir.path()).string() + "/shared/lib/libmixt_fixture_good.so"))
      << testing::read_file(recipe);
  const CommandResult rerun = run_mixt({"check", recipe.string()}, dir.path() / "experiments");
  EXPECT_EQ(rerun.exit_code, 0) << rerun.output;

  const CommandResult override =
      run_mixt({"check", "experiments/short.yaml", "plugins=[shared/lib/libmixt_fixture_good.so]"}, dir.path());
  EXPECT_EQ(override.exit_code, 0) << override.output;
}

// The resolved recipe.yaml reproduces the run: a name taken from the file name is written
// in (re-running the copy made runs/recipe/...).
TEST(CliRun, TheResolvedRecipeKeepsANameTakenFromTheFileName) {
  TempDir dir;
  std::string recipe = testing::replace_once(kTinyRecipe, "name: tiny\n", "");
  recipe = testing::replace_once(recipe, "epochs: 2", "epochs: 1, max_steps_per_epoch: 1");
  dir.write("short.yaml", recipe);
  const CommandResult run = run_mixt({"run", "short.yaml", "data.val=null"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path resolved = only_run_directory(dir.path() / "runs" / "short") / "recipe.yaml";
  EXPECT_THAT(testing::read_file(resolved), HasSubstr("name: \"short\""));
}

// What `mixt check` passed and `mixt run` then refused, or what hung check itself.
TEST(CliBadInput, CheckCatchesWhatRunWouldRefuse) {
  TempDir dir;
  dir.write("r.yaml", kTinyRecipe);
  // trainer.resume naming a file that is no checkpoint: check read only the path.
  CommandResult result = run_mixt({"check", "r.yaml", "trainer.resume=r.yaml"}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("not a mixt checkpoint"));
  // A run name no filesystem takes as a directory name.
  result = run_mixt({"check", "r.yaml", "name=" + std::string(300, 'x')}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("the run name is 300 bytes long; at most 200"));
  // A million threads: ATen started them at once and check never returned.
  result = run_mixt({"check", "r.yaml", "trainer.threads=1000000"}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("trainer.threads: must be in [0, 1024]"));
  // A section unset on the command line is blamed on that override, not on the base file.
  for (const std::string unset : {"data.train=null", "data=null"}) {
    result = run_mixt({"check", "r.yaml", unset}, dir.path());
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output, HasSubstr("mixt: error: command line '" + unset + "': data: missing section"))
        << result.output;
  }
  // `mixt describe bogus`: the kind is what is wrong, not a missing name.
  result = run_mixt({"describe", "optimiser"}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("unknown component kind 'optimiser'"));
}

TEST(CliRun, SigintWritesACheckpointAndExits130) {
  TempDir dir;
  // Epochs of 128 steps: the signal lands mid-epoch (one during the evaluation or the
  // checkpoint stops at the epoch's checkpoint, without `interrupted`).
  const std::string recipe = testing::replace_once(
      testing::replace_once(kTinyRecipe, "epochs: 2", "epochs: 1000"), "limit: 1024", "limit: 8192");
  dir.write("long.yaml", recipe);
  const pid_t child = start_mixt(dir, {"run", "long.yaml"}, "out.txt", "out.txt");
  // Wait until training is under way (the first epoch's checkpoint is written).
  ASSERT_TRUE(wait_for_text(dir.path() / "out.txt", "epoch 2/1000")) << testing::read_file(dir.path() / "out.txt");
  // As torchrun stops its workers: SIGINT, then SIGTERM 3 ms later. The second is the same
  // stop delivered twice, not "quit now": it used to cost the checkpoint.
  ::kill(child, SIGINT);
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << testing::read_file(dir.path() / "out.txt");
  // Said at once, so a long step or evaluation does not look like a hang.
  const std::string said = testing::read_file(dir.path() / "out.txt");
  EXPECT_THAT(said, HasSubstr("mixt: stopping after the current step to write a checkpoint"));
  EXPECT_THAT(said, Not(HasSubstr("interrupted twice")));
  const fs::path run = only_run_directory(dir.path() / "runs" / "tiny");
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "interrupted"));
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "last"));
  // The run's own record says so too: log.txt ended with the last epoch before.
  EXPECT_THAT(testing::read_file(run / "log.txt"), HasSubstr("interrupted after step "));

  // What the interrupt message says to run: the run directory resumes from `interrupted`,
  // the newer of the two, not from the last epoch's checkpoint (that would lose the
  // interrupted epoch's steps). epochs=1: resume, then nothing left to train.
  const CommandResult resumed =
      run_mixt({"run", "long.yaml", "trainer.epochs=1", "trainer.resume=" + run.string()}, dir.path());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("resumed from " + fs::canonical(run / "checkpoints" / "interrupted").string()))
      << resumed.output;
  // Nothing left to train writes nothing: no second run directory holding a recipe.yaml.
  EXPECT_THAT(resumed.output, HasSubstr("nothing left to train"));
  EXPECT_EQ(only_run_directory(dir.path() / "runs" / "tiny"), run);
}

// A background job of a shell script starts with SIGINT ignored, so that a Ctrl-C meant for
// the script does not stop it; mixt keeps it so (as CPython does). SIGHUP (the terminal
// closed) still stops it, with its checkpoint: its default action ended the run without one.
TEST(CliRun, ASigintIgnoredAtStartStaysIgnored) {
  TempDir dir;
  dir.write("long.yaml", testing::replace_once(kTinyRecipe, "epochs: 2", "epochs: 1000"));
  const pid_t child = start_mixt(dir, {"run", "long.yaml"}, "out.txt", "out.txt", /*ignore_sigint=*/true);
  ASSERT_TRUE(wait_for_text(dir.path() / "out.txt", "epoch 2/1000")) << testing::read_file(dir.path() / "out.txt");
  ::kill(child, SIGINT);
  // Two more epochs: it did not stop.
  ASSERT_TRUE(wait_for_text(dir.path() / "out.txt", "epoch 4/1000: val")) << testing::read_file(dir.path() / "out.txt");
  ::kill(child, SIGHUP);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string said = testing::read_file(dir.path() / "out.txt");
  ASSERT_TRUE(WIFEXITED(status)) << said;
  EXPECT_EQ(WEXITSTATUS(status), 130) << said;
  const auto acknowledged = said.find("mixt: stopping after the current step");
  EXPECT_NE(acknowledged, std::string::npos) << said;
  EXPECT_EQ(acknowledged, said.rfind("mixt: stopping after the current step")) << "once, for SIGHUP only\n" << said;
  EXPECT_THAT(said, HasSubstr("(continue with trainer.resume="));  // a checkpoint either way
}

TEST(CliBench, OnePolicyPerChildProcessOneTable) {
  TempDir dir;
  dir.write("tiny.yaml", kTinyRecipe);
  // A misspelt policy: a usage error before anything runs, with the closest name.
  const CommandResult misspelt =
      run_mixt({"bench", "tiny.yaml", "--precision", "fp32,amp_fp61", "--steps", "3", "--warmup", "1"}, dir.path());
  EXPECT_EQ(misspelt.exit_code, 2) << misspelt.output;
  EXPECT_THAT(misspelt.output, HasSubstr("mixt: error: --precision: unknown precision 'amp_fp61'"))
      << misspelt.output;
  EXPECT_THAT(misspelt.output, HasSubstr("did you mean 'amp_fp16'?"));
  EXPECT_THAT(misspelt.output, Not(HasSubstr("mixt bench: fp32"))) << "nothing may run first\n"
                                                                         << misspelt.output;

  // --batch 0 (or less) is refused: it used to mean the recipe's batch size without a word.
  const CommandResult no_batch = run_mixt({"bench", "tiny.yaml", "--batch", "0"}, dir.path());
  EXPECT_EQ(no_batch.exit_code, 2) << no_batch.output;
  EXPECT_THAT(no_batch.output, HasSubstr("mixt: error: --batch must be at least 1, got 0"))
      << no_batch.output;

  // Spaces after the commas, as a quoted shell argument has them, are not part of the names.
  const CommandResult result =
      run_mixt({"bench", "tiny.yaml", "--precision", "fp32, amp_bf16", "--steps", "3", "--warmup", "1"}, dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("| fp32 |"));
  EXPECT_THAT(result.output, HasSubstr("| amp_bf16 |"));

  const fs::path run = only_run_directory(dir.path() / "runs" / "tiny-bench");
  const auto report = nlohmann::json::parse(testing::read_file(run / "bench.json"));
  ASSERT_EQ(report["results"].size(), 2u);
  const auto& fp32 = report["results"][0];
  EXPECT_EQ(fp32["steps"], 3);
  EXPECT_EQ(fp32["batch"], 64);
  EXPECT_GT(fp32["images_per_s"].get<double>(), 0.0);
  EXPECT_GT(fp32["peak_memory_mib"].get<double>(), 10.0);
  EXPECT_TRUE(fp32["loss_finite"].get<bool>());
  EXPECT_LE(fp32["step_ms_p50"].get<double>(), fp32["step_ms_p95"].get<double>());
  EXPECT_TRUE(fs::exists(run / "bench.md"));
  // What the figures were measured with: the CPU as /proc/cpuinfo names it, the versions
  // `mixt --version` prints.
  const auto& environment = report["environment"];
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("model name", 0) != 0) {
  }
  EXPECT_EQ(environment["cpu"], line.substr(line.find(": ") + 2));
  const std::string version = run_mixt({"--version"}).output;
  EXPECT_THAT(version, HasSubstr("mixt " + environment["mixt"].get<std::string>() + "\nLibTorch " +
                         environment["libtorch"].get<std::string>() + "\n"))
      << version << environment.dump();
  EXPECT_THAT(version, HasSubstr("host allocator: " + environment["host_allocator"].get<std::string>() + "\n"));
  EXPECT_THAT(testing::read_file(run / "bench.md"), HasSubstr(", " + environment["date"].get<std::string>()));

  // Not enough data for the requested steps: a clear usage error from the worker, and its
  // row marked failed (the other rows would still be measured).
  const CommandResult too_long = run_mixt({"bench", "tiny.yaml", "--steps", "100"}, dir.path());
  EXPECT_EQ(too_long.exit_code, 1) << too_long.output;
  EXPECT_THAT(too_long.output, HasSubstr("the training data has 16 batches per epoch"));
  EXPECT_THAT(too_long.output, HasSubstr("| fp32 | - |"));
  EXPECT_THAT(too_long.output, HasSubstr("failed (exit 2)"));
}

// A policy whose loss turns inf/NaN keeps its row, marked. JSON has no NaN: the worker's
// line carries the loss as null, which the table used to read as a number and so fail
// ("type must be number, but is null"), with no table and no bench.json.
TEST(CliBench, ANonFiniteLossIsMarkedInItsRow) {
  TempDir dir;
  dir.write("tiny.yaml", kTinyRecipe);
  const CommandResult result = run_mixt(
      {"bench", "tiny.yaml", "--precision", "fp32", "--steps", "3", "--warmup", "1", "optimizer.lr=1e10"}, dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("| fp32 | "));
  EXPECT_THAT(result.output, HasSubstr("NON-FINITE LOSS: numbers not meaningful"));
  const fs::path run = only_run_directory(dir.path() / "runs" / "tiny-bench");
  const auto report = nlohmann::json::parse(testing::read_file(run / "bench.json"));
  ASSERT_EQ(report["results"].size(), 1u);
  EXPECT_FALSE(report["results"][0]["loss_finite"].get<bool>());
}

// An interrupt sent to `mixt bench` alone (kill, a job scheduler; a terminal's Ctrl-C
// reaches the worker too) stops the policy running and the ones after it, keeps the rows
// that finished, and exits 130.
TEST(CliBench, AnInterruptKeepsTheFinishedRowsAndRunsNoMorePolicies) {
  TempDir dir;
  // The whole training set: 900 steps take the amp_bf16 worker several seconds.
  dir.write("tiny.yaml", testing::replace_once(kTinyRecipe, "limit: 1024", "limit: 0"));
  const pid_t child = start_mixt(dir,
                                 {"bench", "tiny.yaml", "--precision", "fp32,amp_bf16,tf32", "--steps", "900",
                                  "--warmup", "0", "trainer.threads=1"},
                                 "out.txt", "err.txt");
  ASSERT_TRUE(wait_for_text(dir.path() / "err.txt", "mixt bench: amp_bf16"))
      << testing::read_file(dir.path() / "err.txt");
  ::kill(child, SIGINT);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string out = testing::read_file(dir.path() / "out.txt"), err = testing::read_file(dir.path() / "err.txt");
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 130) << out << err;
  EXPECT_THAT(out, HasSubstr("| fp32 | "));
  EXPECT_THAT(out, Not(HasSubstr("| fp32 | - |"))) << "fp32 finished before the interrupt\n" << out;
  EXPECT_THAT(out, HasSubstr("| amp_bf16 | - | - | - | - | - | - | interrupted |"));
  EXPECT_THAT(err, Not(HasSubstr("mixt bench: tf32")));
  EXPECT_THAT(err, HasSubstr("mixt bench: stopping; the rows that finished are kept"));
  const fs::path run = only_run_directory(dir.path() / "runs" / "tiny-bench");
  EXPECT_EQ(nlohmann::json::parse(testing::read_file(run / "bench.json"))["results"].size(), 2u);
}

}  // namespace
}  // namespace mixt
