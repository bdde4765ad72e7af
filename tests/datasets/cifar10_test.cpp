// The cifar10 dataset plugin on a tiny tree in the real binary format, written by
// tests/fixtures/data/make_cifar10.py: record i has label i % 10 and pixel
// (i * 7 + channel * 50 + row + 2 * column) % 256.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "expect_error.h"

#include <nlohmann/json.hpp>

#include "data_support.h"

namespace mixt {
namespace {

using testing::BuiltPlugins;
using testing::collect_epoch;
using testing::make_dataset;

class Cifar10 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    testing::run_fixture_script("make_cifar10.py", testing::shell_quote(dir_->path().string()));
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string root() { return dir_->path().string(); }
  BuiltPlugins plugins;
  static testing::TempDir* dir_;
};
testing::TempDir* Cifar10::dir_ = nullptr;

TEST_F(Cifar10, DecodesRecordsAsTheFormatSays) {
  auto train = make_dataset(
      plugins, "{name: cifar10, root: " + root() + ", shuffle: false, batch_size: 100, transforms: [to_tensor]}");
  auto test = make_dataset(plugins, "{name: cifar10, root: " + root() + ", split: test}");
  EXPECT_EQ(train->size(), 100);
  EXPECT_EQ(test->size(), 20);
  EXPECT_EQ(train->num_classes(), 10);
  EXPECT_EQ(train->sample_shape(), (std::vector<std::int64_t>{3, 32, 32}));
  const auto batches = collect_epoch(*train, 0);
  ASSERT_EQ(batches.size(), 1u);
  const at::Tensor i = at::arange(100, at::kLong).view({100, 1, 1, 1});
  const at::Tensor c = at::arange(3, at::kLong).view({1, 3, 1, 1});
  const at::Tensor y = at::arange(32, at::kLong).view({1, 1, 32, 1});
  const at::Tensor x = at::arange(32, at::kLong).view({1, 1, 1, 32});
  const at::Tensor expected = (i * 7 + c * 50 + y + x * 2).remainder(256).to(at::kFloat) / 255.0;
  EXPECT_TRUE(at::allclose(batches[0].inputs, expected));
  EXPECT_TRUE(at::equal(batches[0].targets, at::arange(100, at::kLong).remainder(10)));
}

// The published label order (tests/golden/make_class_names_golden.py).
TEST_F(Cifar10, ClassNamesAreThePublishedOnes) {
  const auto golden =
      nlohmann::json::parse(testing::read_file(testing::configured::source_dir() + "/tests/golden/class_names.json"));
  auto test = make_dataset(plugins, "{name: cifar10, root: " + root() + ", split: test}");
  EXPECT_EQ(class_names_of(*test), golden["cifar10"].get<std::vector<std::string>>());
}

TEST_F(Cifar10, DefaultPipelineNormalisesAndShuffles) {
  auto train = make_dataset(plugins, "{name: cifar10, root: " + root() + ", batch_size: 100}");
  const auto batch = collect_epoch(*train, 0).at(0);
  EXPECT_LT(batch.inputs.min().item<double>(), -1.0);  // normalised, not in [0, 1]
  EXPECT_FALSE(at::equal(batch.targets, at::arange(100, at::kLong).remainder(10)));
  EXPECT_TRUE(at::equal(at::bincount(batch.targets), at::full({10}, 10, at::kLong)));
}

TEST_F(Cifar10, AFileOfTheWrongSizeIsARecipeError) {
  testing::TempDir broken;
  fs::copy(root(), broken.path(), fs::copy_options::recursive);
  fs::resize_file(broken.path() / "test_batch.bin", 3073 * 2 + 5);
  const Error e = testing::thrown_error([&] {
    make_dataset(plugins, "{name: cifar10, split: test, root: " + broken.path().string() + "}");
  });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_THAT(e.what(), HasSubstr("not a multiple of the 3073-byte record"));
}

}  // namespace
}  // namespace mixt
