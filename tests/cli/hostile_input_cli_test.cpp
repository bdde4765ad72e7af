// The real `mixt` binary on input that is hostile or accidental: what is not a recipe or a
// plugin is refused at once (never a hang), process substitution works, and names with
// control characters are refused in `mixt check`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "test_support.h"

namespace mixt {
namespace {

TEST(HostileInputCli, WhatIsNotARecipeIsRefusedAndAPipeIsReadOnce) {
  TempDir dir;
  const CommandResult zero = run_mixt({"check", "/dev/zero"}, dir.path());
  EXPECT_EQ(zero.exit_code, 2) << zero.output;
  EXPECT_THAT(zero.output, HasSubstr("mixt: error: /dev/zero: not a regular file"));

  ASSERT_EQ(::mkfifo((dir.path() / "fifo.yaml").c_str(), 0600), 0);
  const CommandResult fifo = run_mixt({"check", "fifo.yaml"}, dir.path(), "timeout 20");
  EXPECT_EQ(fifo.exit_code, 2) << fifo.output;  // 124 would be the hang
  EXPECT_THAT(fifo.output, HasSubstr("fifo.yaml: not a regular file"));

  dir.write("r.yaml", testing::kTinyRecipe);
  const CommandResult piped = testing::run_command(
      "cd " + testing::shell_quote(dir.path().string()) + " && bash -c " +
      testing::shell_quote(testing::shell_quote(testing::configured::mixt_executable()) + " check <(cat r.yaml)"));
  EXPECT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_THAT(piped.output, HasSubstr(": ok"));

  dir.write("p.yaml", "plugins: [fifo.yaml]\n" + testing::kTinyRecipe);
  const CommandResult plugin = run_mixt({"check", "p.yaml"}, dir.path(), "timeout 20");
  EXPECT_EQ(plugin.exit_code, 2) << plugin.output;
  EXPECT_THAT(plugin.output, HasSubstr("not a regular file, so not a plugin library"));
}

TEST(HostileInputCli, ARunNameWithAControlCharacterIsRefused) {
  TempDir dir;
  for (const std::string name : {"\"a\\0b\"", "\"a\\nb\""}) {
    dir.write("r.yaml", testing::replace_once(testing::kTinyRecipe, "name: tiny", "name: " + name));
    const CommandResult result = run_mixt({"check", "r.yaml"}, dir.path(), "timeout 20");
    EXPECT_EQ(result.exit_code, 2) << name << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr("name: the run name holds a control character"));
  }
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));
}

// A SIGTERM that arrives while the libraries start (before main installs the handlers)
// is exit 130, not the default action's 143. Made deterministic by starting mixt with the
// signal already pending (blocked masks and pending signals survive exec).
TEST(HostileInputCli, ASigtermDuringStartupIsExitOneThirty) {
  testing::TempDir dir;
  const std::string log = (dir.path() / "log").string();
  const char* mixt = testing::configured::mixt_executable().c_str();  // nothing to allocate after fork
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, nullptr);
    ::raise(SIGTERM);  // pending, as if it came during the dynamic linker's work
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, STDERR_FILENO);
    ::execl(mixt, mixt, "list", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(testing::read_file(log), "mixt: interrupted while starting; nothing was done\n");
}

}  // namespace
}  // namespace mixt
