// The signal handlers' two behaviours: a first signal is a request the trainer reads at its
// next step (the process goes on), unless an ExitAtOnceOnSignal lives, when it ends the
// process at once with 130 — what a worker blocked in start-up's waits needs, when
// torchelastic stops it with SIGTERM and kills it only 30 s later. Death tests: each case
// runs in a child process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>

#include "common/interrupt.h"

namespace mixt {
namespace {

TEST(InterruptDeathTest, AFirstSignalIsARequestThatTheProcessOutlives) {
  EXPECT_EXIT(
      {
        install_interrupt_handlers(nullptr);
        std::raise(SIGTERM);
        std::exit(interrupt_requested() ? 7 : 8);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST(InterruptDeathTest, WhileStartingUpAFirstSignalExitsAtOnceWith130) {
  EXPECT_EXIT(
      {
        install_interrupt_handlers(nullptr);
        const ExitAtOnceOnSignal scope("mixt: interrupted while the ranks connected; nothing was done");
        std::raise(SIGTERM);
        std::exit(0);
      },
      ::testing::ExitedWithCode(130), "interrupted while the ranks connected");
}

TEST(InterruptDeathTest, AfterStartUpTheRequestIsBackToARequest) {
  EXPECT_EXIT(
      {
        install_interrupt_handlers(nullptr);
        { const ExitAtOnceOnSignal scope("start-up"); }
        std::raise(SIGTERM);
        std::exit(interrupt_requested() ? 7 : 8);
      },
      ::testing::ExitedWithCode(7), "");
}

}  // namespace
}  // namespace mixt
