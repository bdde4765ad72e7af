#include "interrupt.h"

#include <atomic>
#include <csignal>
#include <unistd.h>

namespace mixt {

namespace {
std::atomic<int> g_signals{0};

extern "C" void on_signal(int) {
  if (g_signals.fetch_add(1) >= 1) {
    // A second Ctrl-C: the user really wants out. Only async-signal-safe calls here.
    static const char message[] = "\nmixt: interrupted twice, exiting without a checkpoint\n";
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, message, sizeof(message) - 1);
    ::_exit(130);
  }
}
}  // namespace

void install_interrupt_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupt_requested() { return g_signals.load() > 0; }
void request_interrupt() { g_signals.fetch_add(1); }
void clear_interrupt_request() { g_signals.store(0); }

}  // namespace mixt
