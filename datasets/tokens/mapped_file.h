// A file mapped read-only: token files can be gigabytes, and a window reads only the pages
// it touches (shared with the page cache) instead of the whole file being copied in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tokens {

class MappedFile {
 public:
  // Throws TokenFileError (token_file.h) naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const std::uint8_t* data_ = nullptr;  // null for an empty file (mmap refuses length 0)
  std::size_t size_ = 0;
};

}  // namespace tokens
