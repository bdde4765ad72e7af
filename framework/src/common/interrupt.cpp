#include "common/interrupt.h"

#include <atomic>
#include <cstddef>
#include <csignal>
#include <ctime>
#include <unistd.h>

namespace mixt {

namespace {
std::atomic<int> g_signals{0};
std::atomic<const char*> g_acknowledgement{nullptr};
// When the first signal came (CLOCK_MONOTONIC, ns). Launchers deliver one stop twice:
// torchrun forwards a SIGINT and sends SIGTERM 3 ms later, Slurm signals every process of
// a step, `timeout` forwards what it gets. A second signal that soon is the same request,
// not a user's "quit now" (which would cost the checkpoint).
std::atomic<long long> g_first_signal_ns{0};
std::atomic<const char*> g_exit_at_once{nullptr};  // the line to write, while an ExitAtOnceOnSignal lives
constexpr long long kSameRequestNs = 2'000'000'000;

long long monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<long long>(now.tv_sec) * 1'000'000'000LL + now.tv_nsec;
}

void write_line(const char* text) {
  std::size_t length = 0;
  while (text[length] != '\0') ++length;  // strlen is not async-signal-safe by the letter
  [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, "\n", 1);
  ignored = ::write(STDERR_FILENO, text, length);
  ignored = ::write(STDERR_FILENO, "\n", 1);
}

// Only async-signal-safe calls here.
extern "C" void on_signal(int) {
  if (const char* line = g_exit_at_once.load()) {
    write_line(line);
    ::_exit(130);
  }
  if (g_signals.fetch_add(1) == 0) {
    g_first_signal_ns.store(monotonic_ns());
    if (const char* acknowledgement = g_acknowledgement.load()) write_line(acknowledgement);
    return;
  }
  if (monotonic_ns() - g_first_signal_ns.load() < kSameRequestNs) return;
  // A second Ctrl-C: the user really wants out.
  write_line("mixt: interrupted twice, exiting without a checkpoint");
  ::_exit(130);
}
}  // namespace

void set_interrupt_acknowledgement(const char* acknowledgement) { g_acknowledgement.store(acknowledgement); }

void install_interrupt_handlers(const char* acknowledgement) {
  set_interrupt_acknowledgement(acknowledgement);
  // A signal the parent set to be ignored stays ignored, as CPython does for SIGINT: a
  // shell starts background jobs (`mixt run ... &` in a script) with SIGINT ignored so that
  // a Ctrl-C meant for the script does not reach them.
  // SIGHUP: the terminal closed (an ssh session lost) — as good a reason to keep the
  // epoch's work as Ctrl-C; its default would end the run without a checkpoint.
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(signal, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    std::signal(signal, on_signal);
  }
}

ExitAtOnceOnSignal::ExitAtOnceOnSignal(const char* line) { g_exit_at_once.store(line); }
ExitAtOnceOnSignal::~ExitAtOnceOnSignal() { g_exit_at_once.store(nullptr); }

bool interrupt_requested() { return g_signals.load() > 0; }
void request_interrupt() { g_signals.fetch_add(1); }
void clear_interrupt_request() {
  g_signals.store(0);
  g_first_signal_ns.store(0);
}

}  // namespace mixt
