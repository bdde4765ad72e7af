#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

std::string storage_hint(int error, const fs::path& directory) {
  struct statvfs status {};
  if ((error == ENOSPC || error == 0) && ::statvfs(directory.c_str(), &status) == 0 && status.f_files > 0 &&
      status.f_favail == 0) {
    return "its file system has no free inodes left (df -i " + directory.string() +
           " shows them): remove files there, or write elsewhere";
  }
  switch (error) {
    case ENOSPC:
      return "the disk is full: free space, or write elsewhere";
    case EFBIG:
      return "the file would exceed the largest one allowed here (ulimit -f, or the file system's limit)";
    case EDQUOT:
      return "the disk quota is used up: free space, or write elsewhere";
    case EACCES:
    case EPERM:
    case EROFS:
      return "is the directory writable? (" + std::string(std::strerror(error)) + ")";
    default:
      return error != 0 ? std::strerror(error) : "is the directory writable?";
  }
}

void remove_stale_temporaries(const fs::path& directory) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(directory, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_error;
    const bool plain = it->is_symlink(type_error) || it->is_regular_file(type_error);
    if (plain && it->path().extension() == ".tmp") {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

void write_file_atomically(const fs::path& file, const std::function<void(std::ostream&)>& write) {
  std::error_code ec;
  const fs::path parent = fs::absolute(file, ec).parent_path();
  fs::create_directories(parent, ec);
  if (ec) throw runtime_error("cannot create directory " + parent.string() + " for " + file.string(), ec.message());
  TemporaryFile temporary{file.string() + ".tmp"};
  {
    errno = 0;
    std::ofstream out(temporary.path, std::ios::binary | std::ios::trunc);
    if (!out) throw runtime_error("cannot write " + file.string(), storage_hint(errno, parent));
    errno = 0;
    write(out);
    out.flush();
    if (!out) throw runtime_error("failed writing " + file.string(), storage_hint(errno == 0 ? ENOSPC : errno, parent));
  }
  // Durable before visible: a crash leaves the old file or the new one, never half.
  errno = 0;
  if (!fsync_path(temporary.path, O_RDONLY)) {
    throw runtime_error("failed writing " + file.string(), storage_hint(errno == 0 ? ENOSPC : errno, parent));
  }
  fs::rename(temporary.path, file, ec);
  if (ec) throw runtime_error("cannot replace " + file.string(), ec.message());
  temporary.kept = true;
  fsync_path(parent, O_RDONLY | O_DIRECTORY);
}

}  // namespace mixt
