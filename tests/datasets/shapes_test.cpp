// The shapes dataset plugin (synthetic segmentation): images and per-pixel masks whose
// shapes agree, the same samples whatever the rank count (DistributedSampler's shards, each
// sample drawn from its index), a val split that is not train again, and names for its classes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mixt/padded_shards.h>

#include "data_support.h"

namespace mixt {
namespace {

at::Tensor all_of(Dataset& data, bool masks) {
  std::vector<at::Tensor> parts;
  for (const Batch& batch : testing::collect_epoch(data, 0)) parts.push_back(masks ? batch.targets : batch.inputs);
  return at::cat(parts);
}

TEST(Shapes, ImagesAndMasksOfTheSizeAskedWithClassesInZeroToThree) {
  testing::BuiltPlugins plugins;
  auto data = testing::make_dataset(plugins, "{name: shapes, size: 20, image_size: 32, batch_size: 8, shuffle: false}");
  EXPECT_EQ(data->num_classes(), 4);
  EXPECT_EQ(data->sample_shape(), (std::vector<std::int64_t>{3, 32, 32}));
  EXPECT_EQ(class_names_of(*data), (std::vector<std::string>{"background", "rectangle", "ellipse", "triangle"}));
  const at::Tensor masks = all_of(*data, true);
  ASSERT_EQ(masks.sizes(), (std::vector<std::int64_t>{20, 32, 32}));
  EXPECT_EQ(masks.scalar_type(), at::kLong);
  EXPECT_GE(masks.min().item<std::int64_t>(), 0);
  EXPECT_LE(masks.max().item<std::int64_t>(), 3);
  // Every image has a shape on its background, and over 20 images every kind appears.
  for (std::int64_t i = 0; i < 20; ++i) EXPECT_GT(masks[i].gt(0).sum().item<std::int64_t>(), 0) << "image " << i;
  for (std::int64_t kind = 1; kind <= 3; ++kind) EXPECT_GT(masks.eq(kind).sum().item<std::int64_t>(), 0) << kind;
  // A shape's pixels differ from the background's colour (up to the noise): the mask marks what the image shows.
  const at::Tensor images = all_of(*data, false);
  const at::Tensor spread = images[0].sub(images[0].mean({1, 2}, true)).abs().sum(0);
  EXPECT_GT(spread.masked_select(masks[0].gt(0)).mean().item<double>(),
            spread.masked_select(masks[0].eq(0)).mean().item<double>());
}

TEST(Shapes, TwoRanksServeTheSamplesOfOneAndValIsNotTrain) {
  testing::BuiltPlugins plugins;
  const std::string section = "{name: shapes, size: 9, image_size: 16, batch_size: 4, shuffle: false}";
  auto whole = testing::make_dataset(plugins, section);
  auto rank0 = testing::make_dataset(plugins, section, {"train", 0, 0, 2, at::kCPU});
  auto rank1 = testing::make_dataset(plugins, section, {"train", 0, 1, 2, at::kCPU});
  const at::Tensor all = all_of(*whole, true), first = all_of(*rank0, true), second = all_of(*rank1, true);
  ASSERT_EQ(first.size(0), 5);
  ASSERT_EQ(second.size(0), 5);  // 4 of its own and the padding: sample 0 again
  EXPECT_EQ(own_samples_of(*rank0), 5);
  EXPECT_EQ(own_samples_of(*rank1), 4);
  for (std::int64_t i = 0; i < 9; ++i) {
    const at::Tensor& shard = i % 2 == 0 ? first : second;
    EXPECT_TRUE(at::equal(shard[i / 2], all[i])) << "sample " << i;
  }
  EXPECT_TRUE(at::equal(second[4], all[0]));
  auto val = testing::make_dataset(plugins, section, {"val", 0, 0, 1, at::kCPU});
  EXPECT_FALSE(at::equal(all_of(*val, true), all));
}

TEST(Shapes, TrainIsShuffledPerEpochAndTheSameForTheSameSeed) {
  testing::BuiltPlugins plugins;
  const std::string section = "{name: shapes, size: 12, image_size: 16, batch_size: 12}";
  auto a = testing::make_dataset(plugins, section), b = testing::make_dataset(plugins, section);
  const at::Tensor epoch0 = testing::collect_epoch(*a, 0).at(0).targets;
  EXPECT_TRUE(at::equal(epoch0, testing::collect_epoch(*b, 0).at(0).targets));
  EXPECT_FALSE(at::equal(epoch0, testing::collect_epoch(*a, 1).at(0).targets));
}

}  // namespace
}  // namespace mixt
