// The zip archive LibTorch writes (PyTorchStreamWriter: entries stored, or deflated for the
// code it saves, each with its CRC-32 in the central directory), checked before LibTorch's reader trusts it: that
// reader checks no CRC and takes sizes on trust (one damaged byte asked it for 4 GB). For checkpoints of format 1,
// which have no CRC of their own.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>

namespace mixt {

// What is wrong with the zip archive held in `in`'s bytes [offset, offset + size), or
// nothing: the central directory found and inside the archive, each entry stored or deflated,
// its data inside the archive, inflating to its size, and its bytes matching its CRC-32.
std::optional<std::string> zip_archive_damage(std::istream& in, std::uint64_t offset, std::uint64_t size);

}  // namespace mixt
