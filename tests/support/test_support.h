// Helpers shared by the test suites: temporary directories, files, and running the real
// `mixt` binary with its exit code and output captured.
#pragma once

#include <gmock/gmock.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "configured_paths.h"

namespace mixt::testing {

namespace fs = std::filesystem;

// The source tree and this build's plugin directory, as the build knows them, unless
// MIXT_TEST_SOURCE_DIR / MIXT_TEST_PLUGIN_DIR say otherwise: the GPU pack runs test
// binaries far from the build (bench/gpu/pack.sh).
inline fs::path source_dir() {
  const char* dir = std::getenv("MIXT_TEST_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::path(testing::configured::source_dir());
}
inline fs::path plugin_dir() {
  const char* dir = std::getenv("MIXT_TEST_PLUGIN_DIR");
  return dir ? fs::path(dir) : fs::path(testing::configured::plugin_dir());
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "mixt-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file;
  }

 private:
  fs::path path_;
};

inline std::string read_file(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A small but real Fashion-MNIST recipe for the end-to-end tests: 1024 training and 512 test
// images, two epochs; a test shortens it with overrides.
inline const std::string kTinyRecipe = R"(name: tiny
model:     { name: simple_cnn, channels: [8, 16], hidden: 32 }
precision: { name: fp32 }
optimizer: { name: sgd, lr: 0.05, momentum: 0.9 }
data:
  train: { name: fashion_mnist, split: train, batch_size: 64, limit: 1024 }
  val:   { name: fashion_mnist, split: test, batch_size: 256, limit: 512 }
trainer: { epochs: 2, seed: 0, threads: 1, log_every: 4 }
output: runs
)";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `text` with the first `from` replaced by `to`; throws when `from` is absent, so a test
// never silently runs on an unmodified fixture.
inline std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos) throw std::logic_error("replace_once: '" + from + "' not found");
  return text.substr(0, at) + to + text.substr(at + from.size());
}

inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// A small tmpfs mounted at `at` while it lives, for full disks and exhausted inodes. Mounting
// needs root: a test checks mounted() and skips otherwise.
class MountedTmpfs {
 public:
  MountedTmpfs(const fs::path& at, const std::string& options) : at_(at) {
    fs::create_directories(at_);
    mounted_ = ::geteuid() == 0 &&
               std::system(("mount -t tmpfs -o " + options + " none " + shell_quote(at_.string())).c_str()) == 0;
  }
  ~MountedTmpfs() {
    if (mounted_) (void)!std::system(("umount " + shell_quote(at_.string())).c_str());
  }
  MountedTmpfs(const MountedTmpfs&) = delete;
  MountedTmpfs& operator=(const MountedTmpfs&) = delete;
  bool mounted() const { return mounted_; }
  // Takes every free block with filler(); removing that file gives them back.
  void fill() const {
    std::ofstream out(filler(), std::ios::binary);
    const std::string block(4096, 'x');
    while (out.write(block.data(), static_cast<std::streamsize>(block.size()))) out.flush();
  }
  fs::path filler() const { return at_ / "filler"; }

 private:
  fs::path at_;
  bool mounted_ = false;
};

// Runs a shell command line, stdout and stderr captured together.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, got);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Runs `mixt ARGS...` in `directory`, with `environment` prepended ("A=1 B=2").
inline CommandResult run_mixt(const std::vector<std::string>& args, const fs::path& directory = fs::current_path(),
                              const std::string& environment = "") {
  std::string command = "cd " + shell_quote(directory.string()) + " && " + environment + " " +
                        shell_quote(testing::configured::mixt_executable());
  for (const auto& arg : args) command.append(" ").append(shell_quote(arg));
  return run_command(command);
}

// Runs a bash script (`set -euo pipefail`) in `directory` under `env ENVIRONMENT`.
inline CommandResult run_shell(const std::string& script, const fs::path& directory, const std::string& environment) {
  return run_command("cd " + shell_quote(directory.string()) + " && env " + environment + " bash -euo pipefail -c " +
                     shell_quote(script));
}

// A checkout-shaped directory for following a document's commands: examples/NAME copied
// (without a stale local build), and `build` pointing at this build.
inline void lay_out_example(const TempDir& dir, const std::string& name) {
  const fs::path example = dir.path() / "examples" / name;
  fs::create_directories(example.parent_path());
  fs::copy(fs::path(testing::configured::source_dir()) / "examples" / name, example, fs::copy_options::recursive);
  fs::remove_all(example / "build");
  fs::create_directory_symlink(testing::configured::binary_dir(), dir.path() / "build");
}

// The ```sh block of a document (relative to the source tree) after `<!-- e2e: MARKER -->`:
// the commands a test runs as the document gives them.
inline std::string documented_commands(const std::string& document, const std::string& marker) {
  const std::string doc = read_file(fs::path(testing::configured::source_dir()) / document);
  const auto at = doc.find("<!-- e2e: " + marker + " -->");
  if (at == std::string::npos) throw std::logic_error(document + " lost its e2e marker " + marker);
  const auto begin = doc.find("```sh\n", at) + 6;
  return doc.substr(begin, doc.find("```", begin) - begin);
}

}  // namespace mixt::testing

// What nearly every test file names, made visible in namespace mixt once here rather than
// by a preamble of using-declarations in each file.
namespace mixt {
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::CommandResult;
using testing::kTinyRecipe;
using testing::run_mixt;
using testing::TempDir;
}  // namespace mixt
