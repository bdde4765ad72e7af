// mixt diagnose's counts against float16's definition, by hand: largest finite 65504,
// smallest normal 2^-14, smallest subnormal 2^-24; round to nearest (even), so a magnitude
// below 2^-25 becomes 0 and one above it becomes 2^-24.
#include <gtest/gtest.h>

#include <limits>

#include "diagnose/float16_range.h"

namespace mixt::diagnose {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

TEST(Float16Range, GradientsFlushedToZeroAtALossScaleAreTheHandCountedOnes) {
  // 2^-25 = 2.98e-8: 1e-8 and -2e-8 vanish at scale 1; 3e-8 rounds up to 2^-24; 1e-3 is
  // normal; 0 and inf are not counted among the non-zero finite values.
  const at::Tensor g = at::tensor({1e-8f, 1e-3f, 0.0f, 3e-8f, -2e-8f, kInf});
  const UnderflowCounts at_1 = count_flushed_in_float16(g, 1);
  EXPECT_EQ(at_1.nonzero, 4);
  EXPECT_EQ(at_1.flushed, 2);
  EXPECT_DOUBLE_EQ(at_1.fraction(), 0.5);
  // Scaled by 2: 2e-8 still vanishes, -4e-8 and 6e-8 survive.
  EXPECT_EQ(count_flushed_in_float16(g, 2).flushed, 1);
  // By 4: 4e-8, -8e-8, 1.2e-7 all survive.
  EXPECT_EQ(count_flushed_in_float16(g, 4).flushed, 0);
  // A float16 gradient tensor is counted the same way (its values widened first): at scale
  // 1e-5, 1e-3 and 2e-3 become about 1e-8 and 2e-8, both below 2^-25; at 1e-4 they survive.
  EXPECT_EQ(count_flushed_in_float16(at::tensor({1e-3f, 2e-3f}).to(at::kHalf), 1e-5).flushed, 2);
  EXPECT_EQ(count_flushed_in_float16(at::tensor({1e-3f, 2e-3f}).to(at::kHalf), 1e-4).flushed, 0);
}

TEST(Float16Range, OutputCountsAreTheHandCountedOnes) {
  const at::Tensor out = at::tensor({1e5f, -7e4f, 1.0f, 1e-6f, 0.0f, kInf, std::nanf("")});
  const OutputCounts c = count_output(out);
  EXPECT_EQ(c.values, 7);
  EXPECT_EQ(c.nonfinite, 2);
  EXPECT_EQ(c.beyond_float16, 2);        // 1e5 and 7e4 exceed 65504
  EXPECT_EQ(c.below_float16_normal, 1);  // 1e-6 < 2^-14 = 6.1e-5; 0 is not counted
  EXPECT_DOUBLE_EQ(c.abs_max, 1e5);      // the largest finite magnitude
  // Exactly the limits: 65504 is float16's, 2^-14 is normal.
  const OutputCounts edges = count_output(at::tensor({65504.0f, 6.103515625e-05f}));
  EXPECT_EQ(edges.beyond_float16, 0);
  EXPECT_EQ(edges.below_float16_normal, 0);
}

}  // namespace
}  // namespace mixt::diagnose
