// The environment in which a test follows a document's out-of-tree build: HOME in the test's
// scratch directory, and the example's compiles through ccache (when installed) with paths
// relative to that directory, so the same example built again in another scratch directory
// (the next test run, CI's clone) is a cache hit instead of ~40 s of compiling per plugin.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_support.h"

namespace mixt::testing {

inline std::string example_environment(const std::filesystem::path& scratch) {
  const std::string dir = shell_quote(scratch.string());
  std::string environment = "HOME=" + dir;
  if (std::system("command -v ccache > /dev/null 2>&1") == 0) {
    environment +=
        " CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR=" + dir +
        " CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime";
  }
  return environment;
}

}  // namespace mixt::testing
