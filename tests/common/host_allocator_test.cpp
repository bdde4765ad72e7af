// The lean host allocator: big freed activations leave the process, small blocks stay for reuse.
// ctest runs every test in a process of its own, so each configures a fresh allocator.
#include "common/host_allocator.h"

#include <ATen/ATen.h>
#include <c10/core/alignment.h>
#include <c10/core/impl/alloc_cpu.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

constexpr std::int64_t kMiB = 1 << 20;

std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// Frees a 24 MiB tensor (which raises glibc's own threshold to 24 MiB), then measures how
// much of a `mib` MiB tensor's pages stay in the process once it is freed.
std::int64_t resident_bytes_kept_after_freeing(std::int64_t mib) {
  { at::empty({24 * kMiB}, at::kByte).fill_(1); }
  const std::int64_t before = resident_bytes();
  std::int64_t held = 0;
  {
    at::Tensor activation = at::empty({mib * kMiB}, at::kByte).fill_(1);
    held = resident_bytes() - before;
  }
  EXPECT_GE(held, (mib - 1) * kMiB) << "the tensor was not resident while it lived";
  return resident_bytes() - before;
}

TEST(HostAllocator, LeanUnmapsAFreedTensorAfterABiggerOneRaisedGlibcsThreshold) {
  ::unsetenv("MALLOC_MMAP_THRESHOLD_");
  const mixt::HostAllocator& allocator = mixt::configure_host_allocator(mixt::HostAllocatorSetting::lean);
  ASSERT_TRUE(allocator.returns_freed_blocks);
  EXPECT_EQ(allocator.mmap_threshold, static_cast<std::size_t>(8 * kMiB));
  EXPECT_LT(resident_bytes_kept_after_freeing(12), kMiB);
}

// The control: glibc as it comes keeps that tensor's pages, which is what lean is for.
TEST(HostAllocator, SystemKeepsTheFreedTensorResident) {
  ::unsetenv("MALLOC_MMAP_THRESHOLD_");
  const mixt::HostAllocator& allocator = mixt::configure_host_allocator(mixt::HostAllocatorSetting::system);
  EXPECT_FALSE(allocator.returns_freed_blocks);
  EXPECT_GE(resident_bytes_kept_after_freeing(12), 11 * kMiB);
}

// Below the threshold the heap keeps what is freed for the next step: with the mapping
// threshold fixed and the trim threshold left at glibc's 128 KiB it would be given back and
// faulted in again every step (measured: Fashion-MNIST ~2x slower).
TEST(HostAllocator, LeanKeepsASmallFreedBlockForReuse) {
  ::unsetenv("MALLOC_MMAP_THRESHOLD_");
  mixt::configure_host_allocator(mixt::HostAllocatorSetting::lean);
  EXPECT_GE(resident_bytes_kept_after_freeing(4), 3 * kMiB);
}

TEST(HostAllocator, LeavesAloneWhatTheUserSet) {
  ::setenv("THP_MEM_ALLOC_ENABLE", "1", 1);
  ::setenv("MALLOC_MMAP_THRESHOLD_", "65536", 1);
  const mixt::HostAllocator& allocator = mixt::configure_host_allocator(mixt::HostAllocatorSetting::lean);
  EXPECT_FALSE(allocator.returns_freed_blocks);
  EXPECT_TRUE(allocator.huge_pages);  // LibTorch's own switch, read at its first allocation
  EXPECT_NE(c10::c10_compute_alignment(c10::gAlloc_threshold_thp), c10::gAlignment);
  EXPECT_EQ(allocator.summary(), "lean (transparent huge pages)");
}

TEST(HostAllocatorSetting, ParsesTheTwoNamesAndNothingElse) {
  EXPECT_EQ(mixt::parse_host_allocator_setting(""), mixt::HostAllocatorSetting::lean);
  EXPECT_EQ(mixt::parse_host_allocator_setting("lean"), mixt::HostAllocatorSetting::lean);
  EXPECT_EQ(mixt::parse_host_allocator_setting("system"), mixt::HostAllocatorSetting::system);
  EXPECT_FALSE(mixt::parse_host_allocator_setting("Lean"));
  EXPECT_FALSE(mixt::parse_host_allocator_setting("auto"));
  EXPECT_FALSE(mixt::parse_host_allocator_setting("jemalloc"));
}

}  // namespace
