// How tensors' CPU memory is handed out, chosen once when a mixt process starts.
//
// LibTorch's CPU tensors come from glibc's malloc. glibc serves blocks above a threshold
// with their own mapping, given back on free, but raises that threshold each time such a
// block is freed (up to 32 MiB): after the first step almost every activation comes from
// the heap, and what the backward pass frees stays resident, interleaved with what is
// still live (~0.7 GiB of ResNet-50's peak at batch 64). `lean` fixes the threshold at
// 8 MiB, so big activations leave on free while the small blocks of a small model are still
// reused from the heap, and the trim threshold at 32 MiB: fixing one switches off glibc's
// adjustment of the other, whose 128 KiB default would give the heap back and fault it in
// again on every step.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mixt {

enum class HostAllocatorSetting {
  lean,    // the default: fixed 8 MiB mapping and 32 MiB trim thresholds
  system,  // glibc's own behaviour, untouched
};

// MIXT_HOST_ALLOCATOR's value: lean (also empty) or system; nullopt when unknown.
std::optional<HostAllocatorSetting> parse_host_allocator_setting(std::string_view text);
std::vector<std::string> host_allocator_setting_names();

// What a process runs with.
struct HostAllocator {
  bool returns_freed_blocks = false;  // the mapping threshold is fixed: blocks >= it are unmapped on free
  std::size_t mmap_threshold = 0;     // that threshold in bytes; 0: glibc's own
  bool huge_pages = false;            // LibTorch madvises blocks >= 2 MiB as huge pages (THP_MEM_ALLOC_ENABLE=1)
  std::string setting = "system";     // what MIXT_HOST_ALLOCATOR asked for

  // One line: "lean (blocks >= 8 MiB unmapped on free)".
  std::string summary() const;
};

// Applies the setting before the process's first tensor, leaving alone a threshold the user
// set (glibc's mmap_threshold in GLIBC_TUNABLES or MALLOC_MMAP_THRESHOLD_), and reports what
// the process runs with, LibTorch's huge pages included (its own THP_MEM_ALLOC_ENABLE: faster
// for large models, slower for small ones, so the user's choice).
const HostAllocator& configure_host_allocator(HostAllocatorSetting setting);

// What configure_host_allocator applied; the system default before it ran.
const HostAllocator& host_allocator();

}  // namespace mixt
