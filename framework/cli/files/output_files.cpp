#include "files/output_files.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "mixt/error.h"

namespace mixt::cli {

namespace fs = std::filesystem;

void check_writable(const std::string& option, const std::string& file) {
  if (file.empty()) return;
  const fs::path parent = fs::absolute(file).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    throw usage_error(option + " " + file + ": the directory " + parent.string() + " does not exist",
                      "create it first, or name a file in an existing directory");
  }
}

void write_file(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw runtime_error("cannot write " + file.string() + ": " + std::strerror(errno));
}

}  // namespace mixt::cli
