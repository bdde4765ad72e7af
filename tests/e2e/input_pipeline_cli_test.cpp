// End to end: the real `mixt` binary training on an image_folder tree (Fashion-MNIST
// JPEGs from tests/fixtures/data/make_image_folder.py, with a corrupt and a truncated file),
// and data recipe errors answered at their file:line:column with exit code 2.
#include <gtest/gtest.h>

#include <memory>

#include "child_process.h"
#include "data_support.h"

namespace mixt {
namespace {

namespace fs = std::filesystem;
using testing::run_mixt;
using testing::TempDir;

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
  EXPECT_NE(result.output.find("mixt: warning: skipping bad sample"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("corrupt.jpg"), std::string::npos) << result.output;
  EXPECT_TRUE(fs::exists(dir.path() / "runs" / "folder")) << result.output;
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
        std::vector<std::string>{MIXT_EXECUTABLE, "run", "r.yaml"}, testing::rank_environment(rank, 2, port),
        dir.path(), dir.path() / (std::to_string(rank) + ".log")));
  }
  std::string logs;
  for (int rank = 0; rank < 2; ++rank) {
    const auto code = ranks[static_cast<std::size_t>(rank)]->wait_for(120);
    const std::string log = testing::read_file(dir.path() / (std::to_string(rank) + ".log"));
    ASSERT_TRUE(code) << "rank " << rank << " still running\n" << log;
    EXPECT_EQ(*code, 1) << log;
    EXPECT_EQ(log.find("terminate called"), std::string::npos) << log;
    logs += log;
  }
  EXPECT_NE(logs.find("is bad (see the warnings above)"), std::string::npos) << logs;
}

TEST(InputPipelineCli, MissingRootIsARecipeErrorAtItsLine) {
  TempDir dir;
  dir.write("r.yaml", recipe("/nonexistent/tree"));
  const auto result = run_mixt({"check", "r.yaml"}, dir.path());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("r.yaml:6:38: data.train.root: dataset root does not exist: /nonexistent/tree"),
            std::string::npos)
      << result.output;
}

TEST(InputPipelineCli, DescribeShowsTransformsAndLoaderOptions) {
  const auto result = run_mixt({"describe", "dataset", "image_folder"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const char* option :
       {"root", "index", "transforms", "random_resized_crop", "workers", "prefetch", "on_bad_sample"}) {
    EXPECT_NE(result.output.find(option), std::string::npos) << option << "\n" << result.output;
  }
}

}  // namespace
}  // namespace mixt
