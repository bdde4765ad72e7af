// The lean host allocator: freed activations leave the process, big tensors get huge pages.
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
#include <sstream>
#include <string>

namespace {

constexpr std::int64_t kMiB = 1 << 20;

std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

std::string read_text(const char* path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The VmFlags line of the mapping that holds `address`, from /proc/self/smaps.
std::string mapping_flags(const void* address) {
  const auto where = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    const std::size_t dash = line.find('-');
    const std::size_t space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find_first_not_of("0123456789abcdef") == dash) {
      const auto start = std::stoull(line.substr(0, dash), nullptr, 16);
      const auto end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = start <= where && where < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Frees a 24 MiB tensor (which raises glibc's own threshold to 24 MiB), then measures
// whether an 8 MiB tensor's pages leave the process when it is freed.
std::int64_t resident_bytes_kept_after_freeing_8_mib() {
  { at::empty({24 * kMiB}, at::kByte).fill_(1); }
  const std::int64_t before = resident_bytes();
  std::int64_t held = 0;
  {
    at::Tensor activation = at::empty({8 * kMiB}, at::kByte).fill_(1);
    held = resident_bytes() - before;
  }
  EXPECT_GE(held, 7 * kMiB) << "the 8 MiB tensor was not resident while it lived";
  return resident_bytes() - before;
}

TEST(HostAllocator, LeanUnmapsAFreedTensorAfterABiggerOneRaisedGlibcsThreshold) {
  ::unsetenv("MALLOC_MMAP_THRESHOLD_");
  const mixt::HostAllocator& allocator = mixt::configure_host_allocator(mixt::HostAllocatorSetting::lean);
  ASSERT_TRUE(allocator.returns_freed_blocks);
  EXPECT_EQ(allocator.mmap_threshold, static_cast<std::size_t>(kMiB));
  EXPECT_LT(resident_bytes_kept_after_freeing_8_mib(), kMiB);
}

// The control: glibc as it comes keeps that tensor's pages, which is what lean is for.
TEST(HostAllocator, SystemKeepsTheFreedTensorResident) {
  ::unsetenv("MALLOC_MMAP_THRESHOLD_");
  const mixt::HostAllocator& allocator = mixt::configure_host_allocator(mixt::HostAllocatorSetting::system);
  EXPECT_FALSE(allocator.returns_freed_blocks);
  EXPECT_GE(resident_bytes_kept_after_freeing_8_mib(), 7 * kMiB);
}

TEST(HostAllocator, LeanAsksForHugePagesWhereTheKernelOffersThem) {
  ::unsetenv("THP_MEM_ALLOC_ENABLE");
  if (!mixt::transparent_huge_pages_offered(read_text("/sys/kernel/mm/transparent_hugepage/enabled"))) {
    GTEST_SKIP() << "this kernel offers no transparent huge pages";
  }
  const mixt::HostAllocator& allocator = mixt::configure_host_allocator(mixt::HostAllocatorSetting::lean);
  EXPECT_TRUE(allocator.huge_pages);
  at::Tensor big = at::empty({16 * kMiB}, at::kByte);
  // "hg": the mapping was madvised MADV_HUGEPAGE (whether the kernel found free huge
  // pages to back it is up to its memory, not to mixt).
  EXPECT_NE(mapping_flags(big.data_ptr()).find(" hg"), std::string::npos) << mapping_flags(big.data_ptr());
  at::Tensor small = at::empty({16}, at::kFloat);
  EXPECT_EQ(mapping_flags(small.data_ptr()).find(" hg"), std::string::npos) << "a small tensor's heap was madvised";
}

TEST(HostAllocator, LeaveAloneWhatTheUserSet) {
  ::setenv("THP_MEM_ALLOC_ENABLE", "0", 1);
  ::setenv("MALLOC_MMAP_THRESHOLD_", "65536", 1);
  const mixt::HostAllocator& allocator = mixt::configure_host_allocator(mixt::HostAllocatorSetting::lean);
  EXPECT_FALSE(allocator.huge_pages);
  EXPECT_FALSE(allocator.returns_freed_blocks);
  EXPECT_EQ(c10::c10_compute_alignment(c10::gAlloc_threshold_thp), c10::gAlignment);
  EXPECT_EQ(allocator.summary(), "lean (glibc malloc as it comes)");
}

TEST(HostAllocatorSetting, ParsesTheThreeNamesAndNothingElse) {
  EXPECT_EQ(mixt::parse_host_allocator_setting(""), mixt::HostAllocatorSetting::automatic);
  EXPECT_EQ(mixt::parse_host_allocator_setting("auto"), mixt::HostAllocatorSetting::automatic);
  EXPECT_EQ(mixt::parse_host_allocator_setting("lean"), mixt::HostAllocatorSetting::lean);
  EXPECT_EQ(mixt::parse_host_allocator_setting("system"), mixt::HostAllocatorSetting::system);
  EXPECT_FALSE(mixt::parse_host_allocator_setting("Lean"));
  EXPECT_FALSE(mixt::parse_host_allocator_setting("jemalloc"));
}

TEST(HostAllocatorSetting, HugePagesAreOfferedUnlessTheKernelSaysNever) {
  EXPECT_TRUE(mixt::transparent_huge_pages_offered("always [madvise] never\n"));
  EXPECT_TRUE(mixt::transparent_huge_pages_offered("[always] madvise never\n"));
  EXPECT_FALSE(mixt::transparent_huge_pages_offered("always madvise [never]\n"));
  EXPECT_FALSE(mixt::transparent_huge_pages_offered(""));  // no THP in this kernel at all
}

}  // namespace
