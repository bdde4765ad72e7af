// What a suite's cases only read — a trained run, a generated fixture tree — made once and
// shared by the suite's processes: under ctest each case is a process of its own, so a
// SetUpTestSuite that trains would train again for every case.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "configured_paths.h"
#include "test_support.h"

namespace mixt::testing {

// FNV-1a, 16 hex digits: stable across processes and builds, as a cache key must be.
inline std::string stable_hash(const std::string& text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// The newest modification time of the mixt program and of everything under build/lib (libmixt,
// its modules, the plugins): what a trained run depends on besides its recipe.
inline std::string build_stamp() {
  namespace fs = std::filesystem;
  fs::file_time_type newest = fs::last_write_time(configured::mixt_executable());
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(configured::binary_dir()) / "lib")) {
    if (entry.is_regular_file()) newest = std::max(newest, entry.last_write_time());
  }
  return std::to_string(newest.time_since_epoch().count());
}

// build/tests/shared/KEY, filled by `make(directory)` unless an earlier process of this build
// filled it: one process makes it while the others wait on a lock. `key` names everything the
// contents depend on (the recipe, the script's text); with `depends_on_build` the contents are
// made again once mixt or a plugin is rebuilt. Cases must only read what is there.
inline std::filesystem::path shared_setup(const std::string& key, bool depends_on_build,
                                          const std::function<void(const std::filesystem::path&)>& make) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(configured::binary_dir()) / "tests/shared";
  fs::create_directories(root);
  const fs::path made = root / key, stamp_file = root / (key + ".stamp");
  const std::string stamp = depends_on_build ? build_stamp() : "-";
  const int lock = ::open((root / (key + ".lock")).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + (root / key).string());
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing releases the lock
  } unlock{lock};
  if (fs::exists(made) && fs::exists(stamp_file) && read_file(stamp_file) == stamp) return made;
  fs::remove_all(made);
  fs::remove(stamp_file);
  fs::create_directories(made);
  make(made);
  // Written last: a case that failed midway leaves no stamp, and the next one makes it again.
  if (!::testing::Test::HasFatalFailure()) std::ofstream(stamp_file) << stamp;
  return made;
}

// `mixt ARGS` (a run, an lr-find) made once for the suite's processes in a shared directory
// that holds RECIPE_NAME with RECIPE_TEXT, and is the command's working directory. Returns that
// directory; what the command printed is in its command_output.txt. The case fails when the
// command did.
inline std::filesystem::path shared_mixt_command(const std::string& suite, const std::string& recipe_name,
                                                 const std::string& recipe_text, const std::vector<std::string>& args) {
  std::string key = recipe_name + '\0' + recipe_text;
  for (const std::string& arg : args) key += '\0' + arg;
  const std::filesystem::path made =
      shared_setup(suite + "-" + stable_hash(key), true, [&](const std::filesystem::path& dir) {
        std::ofstream(dir / recipe_name) << recipe_text;
        const CommandResult result = run_mixt(args, dir);
        std::ofstream(dir / "command_output.txt") << result.output;
        ASSERT_EQ(result.exit_code, 0) << result.output;
      });
  return made;
}

}  // namespace mixt::testing
