// End to end: the real `mixt` binary training on an image_folder tree (Fashion-MNIST
// JPEGs from tests/fixtures/data/make_image_folder.py, with a corrupt and a truncated file),
// and data recipe errors answered at their file:line:column with exit code 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "child_process.h"
#include "data_support.h"
#include "mixt/helpers/safetensors.h"
#include "run_directories.h"

namespace mixt {
namespace {

using testing::only_run_directory;

std::string recipe(const std::string& root) {
  return "name: folder\n"
         "model:     { name: simple_cnn, channels: [8, 16], hidden: 32 }\n"
         "precision: { name: fp32 }\n"
         "optimizer: { name: sgd, lr: 0.05, momentum: 0.9 }\n"
         "data:\n"
         "  train: { name: image_folder, root: " + root + ", batch_size: 16, workers: 2,\n"
         "           transforms: [{name: random_resized_crop, size: 32, scale: [0.5, 1]}, random_horizontal_flip,\n"
         "                        to_tensor, {name: normalize, mean: [0.3, 0.3, 0.3], std: [0.35, 0.35, 0.35]}] }\n"
         "  val:   { name: image_folder, root: " + root + ", batch_size: 32, workers: 1,\n"
         "           transforms: {name: imagenet_eval, size: 32} }\n"
         "trainer: { epochs: 1, seed: 0, threads: 1 }\n"
         "output: runs\n";
}

TEST(InputPipelineCli, TrainsOnAnImageFolderTreeSkippingBadFiles) {
  TempDir dir;
  testing::run_fixture_script("make_image_folder.py", testing::shell_quote((dir.path() / "tree").string()) + " --bad");
  dir.write("r.yaml", recipe((dir.path() / "tree").string()));
  const auto result = run_mixt({"run", "r.yaml"}, dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt: warning: skipping bad sample"));
  EXPECT_THAT(result.output, HasSubstr("corrupt.jpg"));
  EXPECT_TRUE(fs::exists(dir.path() / "runs" / "folder")) << result.output;
  // Counted, not only named once: the two bad files, in training and in validation.
  EXPECT_THAT(result.output, HasSubstr(", 4 bad samples skipped"));
  EXPECT_THAT(result.output, HasSubstr("skipped 4 bad samples"));
}

// The run directory says which output is which class (classes.txt), and its recipe.yaml
// states the class count the model took from the data, so `mixt predict` on it builds the
// same head: before, predict built simple_cnn's default 10 outputs and the weights of a
// 3-class run did not load.
TEST(InputPipelineCli, TheRunDirectoryNamesTheClassesAndPredictTakesItsRecipe) {
  TempDir dir;
  const fs::path tree = dir.path() / "tree";
  testing::run_fixture_script("make_image_folder.py", testing::shell_quote(tree.string()));
  for (const char* gone : {"ankle_boot", "dress", "pullover", "shirt", "sneaker", "trouser", "tshirt"}) {
    fs::remove_all(tree / gone);
  }
  dir.write("r.yaml", recipe(tree.string()));
  const auto trained = run_mixt({"run", "r.yaml", "data.val=null"}, dir.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const fs::path run = only_run_directory(dir.path() / "runs" / "folder");
  EXPECT_EQ(testing::read_file(run / "classes.txt"), "bag\ncoat\nsandal\n");
  EXPECT_THAT(testing::read_file(run / "recipe.yaml"), HasSubstr("num_classes: 3"));

  ASSERT_EQ(run_mixt({"export", run.string(), "-o", "model.safetensors"}, dir.path()).exit_code, 0);
  save_safetensors(dir.path() / "batch.safetensors", {{"input", at::rand({4, 3, 32, 32})}});
  const auto predicted = run_mixt({"predict", (run / "recipe.yaml").string(), "model.weights=model.safetensors",
                                   "--input", "batch.safetensors", "--output", "out.safetensors"},
                                  dir.path());
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  EXPECT_EQ(load_safetensors(dir.path() / "out.safetensors").tensors.at(0).second.sizes(),
            (std::vector<std::int64_t>{4, 3}));
}

// Labels are indices into the sorted class folders: a validation tree with a class renamed,
// or one left out, scored every prediction against the wrong class with exit 0.
TEST(InputPipelineCli, ValidationClassesOtherThanTrainingsAreARecipeError) {
  TempDir dir;
  const fs::path tree = dir.path() / "tree";
  testing::run_fixture_script("make_image_folder.py", testing::shell_quote(tree.string()));
  fs::copy(tree, dir.path() / "renamed", fs::copy_options::recursive);
  fs::rename(dir.path() / "renamed" / "bag", dir.path() / "renamed" / "bags");
  fs::copy(tree, dir.path() / "fewer", fs::copy_options::recursive);
  fs::remove_all(dir.path() / "fewer" / "ankle_boot");
  dir.write("r.yaml", recipe(tree.string()));

  auto result = run_mixt({"check", "r.yaml", "data.val.root=" + (dir.path() / "renamed").string()}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("data.val.name: data.val's classes are not data.train's: label 1 is 'bags' in "
                               "data.val but 'bag' in data.train; only in data.val: bags; only in data.train: bag"))
      << result.output;
  result = run_mixt({"check", "r.yaml", "data.val.root=" + (dir.path() / "fewer").string()}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("label 0 is 'bag' in data.val but 'ankle_boot' in data.train; only in data.train: "
                               "ankle_boot"))
      << result.output;
  result = run_mixt({"check", "r.yaml"}, dir.path());  // the same tree for both
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("classes: ankle_boot, bag, coat, dress, pullover, sandal, shirt, sneaker, trouser, "
                               "tshirt"))
      << result.output;
}

// An epoch in which every file was bad trained nothing and ended "done" with exit 0.
TEST(InputPipelineCli, AnEpochOfOnlyBadFilesIsARuntimeFailure) {
  TempDir dir;
  for (const char* file : {"a/1.jpg", "a/2.jpg", "b/1.jpg"}) {
    fs::create_directories((dir.path() / "tree" / file).parent_path());
    dir.write("tree/" + std::string(file), "not a JPEG at all");
  }
  dir.write("r.yaml", recipe((dir.path() / "tree").string()));
  const auto result = run_mixt({"run", "r.yaml", "data.val=null"}, dir.path());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("mixt: error: data.train gave no usable sample in epoch 1: all 3 were skipped as bad"))
      << result.output;
}

// Two Gloo ranks with batch_size 1: a rank whose batch is one bad file cannot skip it
// without falling a step behind (before, it went on to evaluation and Gloo aborted the
// process on the mismatched collective: exit 134). Now that rank stops with a clear error,
// the other follows within the timeout, both exit 1.
TEST(InputPipelineCli, ABadBatchOnOneRankStopsEveryRankCleanly) {
  TempDir dir;
  testing::run_fixture_script("make_image_folder.py", testing::shell_quote((dir.path() / "tree").string()) + " --bad");
  std::string text = recipe((dir.path() / "tree").string());
  text = testing::replace_once(text, "batch_size: 16, workers: 2", "batch_size: 1, workers: 1");
  text = testing::replace_once(text, "threads: 1 }", "threads: 1, distributed: { backend: gloo, timeout: 20 } }");
  dir.write("r.yaml", text);
  const int port = testing::free_port();
  std::vector<std::unique_ptr<testing::ChildProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{testing::configured::mixt_executable(), "run", "r.yaml"},
        testing::rank_environment(rank, 2, port), dir.path(), dir.path() / (std::to_string(rank) + ".log")));
  }
  std::string logs;
  for (int rank = 0; rank < 2; ++rank) {
    const auto code = ranks[static_cast<std::size_t>(rank)]->wait_for(120);
    const std::string log = testing::read_file(dir.path() / (std::to_string(rank) + ".log"));
    ASSERT_TRUE(code) << "rank " << rank << " still running\n" << log;
    EXPECT_EQ(*code, 1) << log;
    EXPECT_THAT(log, Not(HasSubstr("terminate called")));
    logs += log;
  }
  EXPECT_THAT(logs, HasSubstr("is bad (see the warnings above)"));
}

TEST(InputPipelineCli, MissingRootIsARecipeErrorAtItsLine) {
  TempDir dir;
  dir.write("r.yaml", recipe("/nonexistent/tree"));
  const auto result = run_mixt({"check", "r.yaml"}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("r.yaml:6:38: data.train.root: dataset root does not exist: /nonexistent/tree"))
      << result.output;
}

TEST(InputPipelineCli, DescribeShowsTransformsAndLoaderOptions) {
  const auto result = run_mixt({"describe", "dataset", "image_folder"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const char* option :
       {"root", "index", "transforms", "random_resized_crop", "workers", "prefetch", "on_bad_sample"}) {
    EXPECT_THAT(result.output, HasSubstr(option)) << option << "\n" << result.output;
  }
}

}  // namespace
}  // namespace mixt
