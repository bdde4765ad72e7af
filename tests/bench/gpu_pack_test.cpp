// The GPU run's pack (bench/gpu/pack.sh) is self-contained: bench/gpu/pack_check.sh packs
// it, moves it, hides the build's lib/, yaml-cpp and the dataset package in a private mount
// namespace, and runs every part of run.sh CPU-sized. Root only (unshare -m).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "test_support.h"

namespace mixt {
namespace {

TEST(GpuPack, RunsOnTheCpuWithoutTheBuild) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a private mount namespace";
  const testing::CommandResult result = testing::run_command(
      "bash " + testing::shell_quote(testing::configured::source_dir() + "/bench/gpu/pack_check.sh") + " " +
      testing::shell_quote(testing::configured::binary_dir()));
  // 77: pack_check found no mount namespace to make (root in a container without CAP_SYS_ADMIN).
  if (result.exit_code == 77) GTEST_SKIP() << result.output;
  // The inner test binaries print "[  SKIPPED ]" for their CUDA cases: ctest's skip pattern
  // for discovered tests would then report this test skipped precisely when it fails.
  std::string shown = result.output;
  for (auto at = shown.find("[  SKIPPED ]"); at != std::string::npos; at = shown.find("[  SKIPPED ]", at)) {
    shown.replace(at, 12, "[ (skipped) ]");
  }
  ASSERT_EQ(result.exit_code, 0) << shown;
  EXPECT_THAT(result.output, HasSubstr("pack_check: the pack runs every part"));
  EXPECT_THAT(result.output, HasSubstr("| fp32 |"));  // the ResNet-50 row
}

}  // namespace
}  // namespace mixt
