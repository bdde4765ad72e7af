// The synthetic dataset plugin: inputs made once, of the shape asked, reused every batch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "expect_error.h"

#include "data_support.h"

namespace mixt {
namespace {

TEST(Synthetic, DeliversTheShapeAndCountAsked) {
  testing::BuiltPlugins plugins;
  auto data =
      testing::make_dataset(plugins, "{name: synthetic, shape: [3, 16, 12], num_classes: 7, size: 50, batch_size: 16}");
  EXPECT_EQ(data->size(), 50);
  EXPECT_EQ(data->num_classes(), 7);
  EXPECT_EQ(data->sample_shape(), (std::vector<std::int64_t>{3, 16, 12}));
  EXPECT_EQ(data->batches_per_epoch(), 4);
  const auto batches = testing::collect_epoch(*data, 0);
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[0].inputs.sizes(), (std::vector<std::int64_t>{16, 3, 16, 12}));
  EXPECT_EQ(batches[3].inputs.size(0), 2);
  // Generated once: every batch is the same memory.
  EXPECT_EQ(batches[0].inputs.data_ptr(), batches[1].inputs.data_ptr());
  EXPECT_GE(batches[0].targets.min().item<std::int64_t>(), 0);
  EXPECT_LT(batches[0].targets.max().item<std::int64_t>(), 7);
  EXPECT_NEAR(batches[0].inputs.std().item<double>(), 1.0, 0.1);
}

TEST(Synthetic, ShardsAndChannelsLast) {
  testing::BuiltPlugins plugins;
  auto data =
      testing::make_dataset(plugins, "{name: synthetic, size: 10, batch_size: 4, drop_last: true, channels_last: true}",
                            {"train", 0, 1, 3, at::kCPU});
  EXPECT_EQ(data->size(), 4);
  EXPECT_EQ(data->batches_per_epoch(), 1);
  EXPECT_TRUE(testing::collect_epoch(*data, 0).at(0).inputs.is_contiguous(at::MemoryFormat::ChannelsLast));
}

// A batch larger than the data: one short batch, or none with drop_last (as every other
// dataset counts it; it gave one). A size of 2^63-1 wrapped the batch count negative, and
// the run ended "done" with 0 steps.
TEST(Synthetic, BatchesAreCountedWithTheRecipesBatchSize) {
  testing::BuiltPlugins plugins;
  EXPECT_EQ(testing::make_dataset(plugins, "{name: synthetic, shape: [2], size: 10, batch_size: 16}")
                ->batches_per_epoch(),
            1);
  EXPECT_EQ(testing::make_dataset(plugins, "{name: synthetic, shape: [2], size: 10, batch_size: 16, drop_last: true}")
                ->batches_per_epoch(),
            0);
  const Error e = testing::thrown_error([&] {
    testing::make_dataset(plugins, "{name: synthetic, shape: [2], size: 9223372036854775807}");
  });
  EXPECT_THAT(e.what(), HasSubstr("data.size: must be in [1, 10^12]"));
}

TEST(Synthetic, BadShapeIsARecipeError) {
  testing::BuiltPlugins plugins;
  const Error e = testing::thrown_error([&] {
    testing::make_dataset(plugins, "{name: synthetic, shape: [3, 0, 4]}");
  });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_THAT(e.what(), HasSubstr("data.shape: every dimension must be positive"))
      << e.what();
}

}  // namespace
}  // namespace mixt
