#include "common/append_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace mixt {

void AppendFile::open(const std::filesystem::path& path, bool fresh) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (fresh ? O_TRUNC : 0), 0644);
  if (fd_ < 0) open_errno_ = errno;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool AppendFile::append(const std::string& line) {
  if (fd_ < 0) {
    errno = open_errno_;
    return false;
  }
  const std::string whole = line + '\n';
  const off_t start = ::lseek(fd_, 0, SEEK_END);
  std::size_t written = 0;
  while (written < whole.size()) {
    const ssize_t n = ::write(fd_, whole.data() + written, whole.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int why = n < 0 ? errno : ENOSPC;
      // Cut the part that went in; a file that cannot be cut (a device) keeps no line anyway.
      if (written > 0 && start >= 0) (void)!::ftruncate(fd_, start);
      errno = why;
      return false;
    }
    written += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace mixt
