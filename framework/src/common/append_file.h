// A file that grows by whole lines: each line goes in with one write at the end, and a
// write that fails part-way (a disk that filled up) is cut back to where the line began, so
// the file never holds half a line for the next line to be glued to.
#pragma once

#include <filesystem>
#include <string>

namespace mixt {

class AppendFile {
 public:
  AppendFile() = default;
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  // `fresh`: start the file empty; otherwise append to what it holds.
  void open(const std::filesystem::path& path, bool fresh);
  // Appends `line` and a newline. False, with errno saying why, when it could not be
  // written whole; the file is then as it was before.
  bool append(const std::string& line);

 private:
  int fd_ = -1;
  int open_errno_ = 0;  // why opening failed, for every append after it
};

}  // namespace mixt
