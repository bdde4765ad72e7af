// A stop signal during start-up is exit 130 like any other stop. The shared libraries'
// initialisers (LibTorch's take about 0.3 s) run before main, where the handlers are
// installed; until then SIGINT, SIGTERM and SIGHUP would kill by their default action (143
// for SIGTERM). So they are blocked from the executable's preinit array, which the dynamic
// linker runs before any library initialiser, and held pending until main decides.
#include "process/startup_signals.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>

namespace mixt::cli {
namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, signal);
  return set;
}

void block_stop_signals(int, char**, char**) {
  const sigset_t stops = stop_signals();
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);
}

}  // namespace

bool end_of_startup() {
  const sigset_t stops = stop_signals();
  sigset_t pending;
  sigemptyset(&pending);
  bool stopped = false;
  if (sigpending(&pending) == 0) {
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) stopped = stopped || sigismember(&pending, signal) == 1;
  }
  if (!stopped) pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
  return stopped;
}

}  // namespace mixt::cli

// Only an executable has a preinit array; `used` keeps the entry through optimisation.
__attribute__((section(".preinit_array"), used)) static void (*const kBlockStopSignals)(int, char**, char**) =
    mixt::cli::block_stop_signals;
