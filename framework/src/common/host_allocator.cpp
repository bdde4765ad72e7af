#include "common/host_allocator.h"

#include <c10/core/alignment.h>
#include <c10/core/impl/alloc_cpu.h>
#include <malloc.h>

#include <cstdlib>

namespace mixt {
namespace {

constexpr std::size_t kLeanMmapThreshold = std::size_t{8} << 20;
constexpr std::size_t kLeanTrimThreshold = std::size_t{32} << 20;

HostAllocator& applied() {
  static HostAllocator allocator;
  return allocator;
}

bool user_set_mmap_threshold() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
         (tunables != nullptr &&
          std::string_view(tunables).find("glibc.malloc.mmap_threshold") != std::string_view::npos);
}

// LibTorch page-aligns every block once THP_MEM_ALLOC_ENABLE is on (and madvises those of
// 2 MiB and more): its alignment for a 2 MiB block says whether the variable took effect.
bool libtorch_allocates_huge_pages() {
  return c10::c10_compute_alignment(c10::gAlloc_threshold_thp) != c10::gAlignment;
}

}  // namespace

std::optional<HostAllocatorSetting> parse_host_allocator_setting(std::string_view text) {
  if (text.empty() || text == "lean") return HostAllocatorSetting::lean;
  if (text == "system") return HostAllocatorSetting::system;
  return std::nullopt;
}

std::vector<std::string> host_allocator_setting_names() { return {"lean", "system"}; }

std::string HostAllocator::summary() const {
  std::string text = setting;
  std::vector<std::string> parts;
  if (returns_freed_blocks) {
    const bool whole_mib = mmap_threshold % (std::size_t{1} << 20) == 0;
    parts.push_back("blocks >= " + std::to_string(whole_mib ? mmap_threshold >> 20 : mmap_threshold >> 10) +
                    (whole_mib ? " MiB" : " KiB") + " unmapped on free");
  }
  if (huge_pages) parts.push_back("transparent huge pages");
  if (parts.empty()) return text + " (glibc malloc as it comes)";
  text += " (";
  for (std::size_t i = 0; i < parts.size(); ++i) text += (i ? ", " : "") + parts[i];
  return text + ")";
}

const HostAllocator& configure_host_allocator(HostAllocatorSetting setting) {
  HostAllocator& allocator = applied();
  allocator.setting = setting == HostAllocatorSetting::lean ? "lean" : "system";
  if (setting == HostAllocatorSetting::lean && !user_set_mmap_threshold() &&
      ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLeanMmapThreshold)) == 1) {
    ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(kLeanTrimThreshold));
    allocator.returns_freed_blocks = true;
    allocator.mmap_threshold = kLeanMmapThreshold;
  }
  allocator.huge_pages = libtorch_allocates_huge_pages();
  return allocator;
}

const HostAllocator& host_allocator() { return applied(); }

}  // namespace mixt
