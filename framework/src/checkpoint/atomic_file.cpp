#include "checkpoint/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "mixt/error.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {

bool fsync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return false;
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  return synced;
}

// Removes the temporary file unless it was renamed into place.
struct TemporaryFile {
  fs::path path;
  bool kept = false;
  ~TemporaryFile() {
    std::error_code ec;
    if (!kept) fs::remove(path, ec);
  }
};

}  // namespace

void write_file_atomically(const fs::path& file, const std::function<void(std::ostream&)>& write) {
  std::error_code ec;
  const fs::path parent = fs::absolute(file, ec).parent_path();
  fs::create_directories(parent, ec);
  if (ec) throw runtime_error("cannot create directory " + parent.string() + " for " + file.string(), ec.message());
  TemporaryFile temporary{file.string() + ".tmp"};
  {
    std::ofstream out(temporary.path, std::ios::binary | std::ios::trunc);
    if (!out) throw runtime_error("cannot write " + file.string(), "is the directory writable?");
    write(out);
    out.flush();
    if (!out) throw runtime_error("failed writing " + file.string(), "is the disk full?");
  }
  // Durable before visible: a crash leaves the old file or the new one, never half.
  if (!fsync_path(temporary.path, O_RDONLY)) {
    throw runtime_error("failed writing " + file.string(), "is the disk full?");
  }
  fs::rename(temporary.path, file, ec);
  if (ec) throw runtime_error("cannot replace " + file.string(), ec.message());
  temporary.kept = true;
  fsync_path(parent, O_RDONLY | O_DIRECTORY);
}

}  // namespace mixt
