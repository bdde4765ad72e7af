// How tensors' CPU memory is handed out, chosen once when a mixt process starts.
//
// LibTorch's CPU tensors come from glibc's malloc. glibc serves blocks above a threshold
// with their own mapping, given back on free, but raises that threshold each time such a
// block is freed (up to 32 MiB): after the first step almost every activation comes from
// the heap, and what the backward pass frees stays resident, interleaved with what is
// still live. ResNet-50's peak RSS at batch 64 holds ~0.7 GiB of such freed memory. The
// `lean` allocator fixes the threshold at 1 MiB and asks for transparent huge pages for
// blocks of 2 MiB and more (LibTorch's THP_MEM_ALLOC_ENABLE), so freed activations leave
// at once and the fresh mappings fault in 2 MiB at a time instead of 4 KiB.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mixt {

enum class HostAllocatorSetting {
  automatic,  // lean where the kernel offers transparent huge pages, else system
  lean,       // fixed 1 MiB mapping threshold, and huge pages where offered
  system,     // glibc's and LibTorch's own behaviour, untouched
};

// MIXT_HOST_ALLOCATOR's value: auto (also empty), lean or system; nullopt when unknown.
std::optional<HostAllocatorSetting> parse_host_allocator_setting(std::string_view text);
std::vector<std::string> host_allocator_setting_names();

// Whether /sys/kernel/mm/transparent_hugepage/enabled's text ("always [madvise] never")
// lets a program ask for huge pages: [always] or [madvise] selected.
bool transparent_huge_pages_offered(std::string_view enabled_file);

// What a process runs with.
struct HostAllocator {
  bool returns_freed_blocks = false;  // the mapping threshold is fixed: blocks >= it are unmapped on free
  std::size_t mmap_threshold = 0;     // that threshold in bytes; 0: glibc's own
  bool huge_pages = false;            // LibTorch madvises blocks >= 2 MiB as huge pages
  std::string setting = "system";     // what MIXT_HOST_ALLOCATOR asked for, resolved

  // One line: "lean (blocks >= 1 MiB unmapped on free, transparent huge pages)".
  std::string summary() const;
};

// Applies the setting before the process's first tensor, leaving alone what the user set
// (THP_MEM_ALLOC_ENABLE, or glibc's mmap_threshold in GLIBC_TUNABLES/MALLOC_MMAP_THRESHOLD_).
// Reports what took effect: LibTorch reads THP_MEM_ALLOC_ENABLE at its first allocation.
const HostAllocator& configure_host_allocator(HostAllocatorSetting setting);

// What configure_host_allocator applied; the system default before it ran.
const HostAllocator& host_allocator();

}  // namespace mixt
