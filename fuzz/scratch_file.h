// A file (or folder) of this process's own under the temporary folder, removed when the input
// is done: for the readers that take a path, not bytes.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

struct ScratchFile {
  explicit ScratchFile(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("mixt_fuzz_" + std::to_string(::getpid()) + "_" + name)) {}
  // The file holding `size` bytes at `data`.
  ScratchFile(const std::string& name, const std::uint8_t* data, std::size_t size) : ScratchFile(name) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  std::filesystem::path path;
};
