// The environment in which a test follows a document's out-of-tree build: HOME in the test's
// scratch directory, and the example's compiles through ccache (when installed) with paths
// relative to that directory, so the same example built again in another scratch directory
// (the next test run, CI's clone) is a cache hit instead of ~40 s of compiling per plugin.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "test_support.h"

namespace mixt::testing {

inline std::string example_environment(const std::filesystem::path& scratch) {
  const std::string dir = shell_quote(scratch.string());
  std::string environment = "HOME=" + dir;
  if (std::system("command -v ccache > /dev/null 2>&1") == 0) {
    // The cache of the user running the tests: under the scratch HOME ccache would start an
    // empty one in each scratch directory, and never hit.
    const CommandResult cache_dir = run_command("ccache -k cache_dir");
    const std::string cache = cache_dir.output.substr(0, cache_dir.output.find('\n'));
    if (cache_dir.exit_code == 0 && !cache.empty()) environment += " CCACHE_DIR=" + shell_quote(cache);
    environment +=
        " CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR=" + dir +
        " CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime";
  }
  return environment;
}

// A document's commands, which begin by installing this build into "$HOME/.local/mixt", run
// against the one install the ctest fixture examples_install made with that same command
// (into configured::examples_prefix()): $HOME/.local/mixt in `scratch` links to it and the
// install line goes. One install for all the example tests instead of one each.
inline std::string on_shared_install(const std::string& script, const std::filesystem::path& scratch) {
  const std::filesystem::path prefix = testing::configured::examples_prefix();
  if (!std::filesystem::exists(prefix / "bin/mixt")) {
    throw std::logic_error("no installed mixt in " + prefix.string() +
                           ": run the test through ctest (its fixture examples_install installs it), or "
                           "cmake --install build --prefix " +
                           prefix.string());
  }
  std::filesystem::create_directories(scratch / ".local");
  std::filesystem::create_directory_symlink(prefix, scratch / ".local/mixt");
  return replace_once(script, "cmake --install build --prefix \"$HOME/.local/mixt\"\n", "");
}

}  // namespace mixt::testing
