// AutocastScope mirrors torch.autocast: state set inside, restored outside, nesting
// counted, inner disabled regions run in full precision. (In Python:
//   with torch.autocast("cpu", torch.bfloat16): torch.mm(a, b).dtype -> torch.bfloat16
//   ... with torch.autocast("cpu", enabled=False): torch.mm(a, b).dtype -> torch.float32)
#include "mixt/autocast.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

namespace mixt {
namespace {

TEST(AutocastScope, EntersAndRestoresTheDeviceState) {
  const at::Tensor a = at::randn({4, 4}), b = at::randn({4, 4});
  ASSERT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  {
    AutocastScope scope(at::kCPU, at::kBFloat16);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(at::kCPU));
    EXPECT_EQ(at::mm(a, b).scalar_type(), at::kBFloat16);
    {
      FullPrecisionScope full(at::kCPU);
      EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
      EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
    }
    EXPECT_TRUE(at::autocast::is_autocast_enabled(at::kCPU));
    EXPECT_EQ(at::autocast::get_autocast_dtype(at::kCPU), at::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
}

TEST(AutocastScope, DefaultScopeChangesNothingAndMovesSafely) {
  {
    AutocastScope none;
    EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  }
  {
    AutocastScope outer(at::kCPU, at::kHalf);
    AutocastScope moved(std::move(outer));  // only one of them restores
    EXPECT_TRUE(at::autocast::is_autocast_enabled(at::kCPU));
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
}

TEST(AutocastScope, NestingCounterReturnsToZero) {
  {
    AutocastScope outer(at::kCPU, at::kBFloat16);
    { AutocastScope inner(at::kCPU, at::kBFloat16); }
  }
  // Had the counter leaked, this increment would not return 1.
  EXPECT_EQ(at::autocast::increment_nesting(), 1);
  EXPECT_EQ(at::autocast::decrement_nesting(), 0);
}

}  // namespace
}  // namespace mixt
