// The fashion_mnist dataset plugin on the real files from the Debian package. Expected
// values are published facts of the dataset: 60,000 training and 10,000 test images of
// 28x28, ten classes of exactly 6,000 (train) and 1,000 (test) images each, and the
// first training label is 9 (ankle boot).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plugins.h"
#include "recipe/recipe_loader.h"
#include "expect_error.h"
#include "test_support.h"

namespace mixt {
namespace {

std::unique_ptr<Dataset> make(testing::BuiltPlugins& plugins, const std::string& yaml, std::uint64_t seed = 0) {
  static std::vector<RecipeNodePtr> keep_alive;
  keep_alive.push_back(parse_yaml("data: " + yaml, "test"));
  return plugins.registry.make_dataset(Config(keep_alive.back(), "").section("data"),
                                       DatasetContext{"train", seed, 0, 1, at::kCPU});
}

at::Tensor epoch_labels(Dataset& data, std::int64_t epoch) {
  data.start_epoch(epoch);
  std::vector<at::Tensor> labels;
  while (auto batch = data.next_batch()) labels.push_back(batch->targets);
  return at::cat(labels);
}

TEST(FashionMnist, ReadsThePublishedSplits) {
  testing::BuiltPlugins plugins;
  auto train = make(plugins, "{name: fashion_mnist, split: train, batch_size: 1000, shuffle: false}");
  auto test = make(plugins, "{name: fashion_mnist, split: test, batch_size: 1000}");
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(train->sample_shape(), (std::vector<std::int64_t>{1, 28, 28}));
  const at::Tensor labels = epoch_labels(*train, 0);
  EXPECT_EQ(labels[0].item<std::int64_t>(), 9);
  EXPECT_TRUE(at::equal(at::bincount(labels), at::full({10}, 6000, at::kLong)));
  EXPECT_TRUE(at::equal(at::bincount(epoch_labels(*test, 0)), at::full({10}, 1000, at::kLong)));
}

// torchvision's FashionMNIST.classes (tests/golden/make_class_names_golden.py).
TEST(FashionMnist, ClassNamesAreTorchvisions) {
  const auto golden =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/class_names.json"));
  testing::BuiltPlugins plugins;
  auto test = make(plugins, "{name: fashion_mnist, split: test, batch_size: 1000}");
  EXPECT_EQ(class_names_of(*test), golden["fashion_mnist"].get<std::vector<std::string>>());
}

TEST(FashionMnist, NormalisedPixelsHaveTheStatedMeanAndStd) {
  testing::BuiltPlugins plugins;
  auto train = make(plugins, "{name: fashion_mnist, batch_size: 60000, shuffle: false}");
  train->start_epoch(0);
  const at::Tensor x = train->next_batch()->inputs;
  EXPECT_NEAR(x.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(x.std().item<double>(), 1.0, 0.01);
}

TEST(FashionMnist, ShuffleDependsOnlyOnSeedAndEpoch) {
  testing::BuiltPlugins plugins;
  auto a = make(plugins, "{name: fashion_mnist, batch_size: 500, limit: 2000}", 7);
  auto b = make(plugins, "{name: fashion_mnist, batch_size: 300, limit: 2000}", 7);
  auto c = make(plugins, "{name: fashion_mnist, batch_size: 500, limit: 2000}", 8);
  EXPECT_TRUE(at::equal(epoch_labels(*a, 3), epoch_labels(*b, 3)));
  EXPECT_FALSE(at::equal(epoch_labels(*a, 3), epoch_labels(*a, 4)));
  EXPECT_FALSE(at::equal(epoch_labels(*a, 3), epoch_labels(*c, 3)));
  // Same multiset of labels whatever the order.
  EXPECT_TRUE(at::equal(at::bincount(epoch_labels(*a, 3)), at::bincount(epoch_labels(*c, 5))));
}

TEST(FashionMnist, MissingRootIsARecipeErrorAtTheKey) {
  testing::BuiltPlugins plugins;
  const Error e = testing::thrown_error([&] {
    make(plugins, "{name: fashion_mnist, root: /nonexistent/fmnist}");
  });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_THAT(e.what(), HasSubstr("data.root: dataset root does not exist: /nonexistent/fmnist"))
      << e.what();
}

// Found by fuzzing (fuzz/regressions/idx): the header's count x rows x cols was computed in
// int64 and overflowed (undefined; a wrapped product could match the file's size and ask for
// an allocation of exabytes). Such a header is now a truncated file at data.root.
TEST(FashionMnist, AHeaderWhoseSizeOverflowsIsATruncatedFile) {
  const testing::TempDir root;
  const auto big_endian = [](std::uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
  };
  root.write("train-images-idx3-ubyte",
             big_endian(0x803) + big_endian(229) + big_endian(295064276) + big_endian(3493311349) + "pixels");
  root.write("train-labels-idx1-ubyte", big_endian(0x801) + big_endian(1) + "\x09");
  testing::BuiltPlugins plugins;
  const Error e =
      testing::thrown_error([&] { make(plugins, "{name: fashion_mnist, root: " + root.path().string() + "}"); });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_THAT(e.what(), HasSubstr("is truncated: header promises 229 images of 295064276 x 3493311349")) << e.what();
}

}  // namespace
}  // namespace mixt
