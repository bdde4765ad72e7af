// SIGINT/SIGTERM/SIGHUP handling: the first signal asks the trainer to stop after the
// current step (it then writes a checkpoint and exits 130) and says so on stderr at once, so
// a long step or evaluation does not look like a hang; a second one, 2 s or more after the
// first, exits at once (one sooner is the same stop delivered twice by a launcher). A
// signal ignored when mixt starts (a background job of a shell script) stays ignored.
#pragma once

namespace mixt {
inline constexpr const char* kStopAfterStep =
    "mixt: stopping after the current step to write a checkpoint (again to quit at once, without one)";
// Before training: nothing to save yet, so nothing is written.
inline constexpr const char* kStopBeforeTraining = "mixt: stopping before training starts (again to quit at once)";
// `acknowledgement`: the line written when the first signal arrives (a string literal, or
// null for none, e.g. on the ranks other than 0). The second signal's line is fixed.
void install_interrupt_handlers(const char* acknowledgement = kStopAfterStep);
// Changes the line of the first signal (null: silent).
void set_interrupt_acknowledgement(const char* acknowledgement);
bool interrupt_requested();

// While one lives, a first signal exits at once (130): for the blocking waits of start-up
// (the store, the ranks' agreement, the process group's connections), where there is
// nothing to save and no point at which to look at the request. torchelastic stops a
// failed attempt's workers with SIGTERM and kills them only 30 s later.
class ExitAtOnceOnSignal {
 public:
  explicit ExitAtOnceOnSignal(const char* line);
  ~ExitAtOnceOnSignal();
  ExitAtOnceOnSignal(const ExitAtOnceOnSignal&) = delete;
  ExitAtOnceOnSignal& operator=(const ExitAtOnceOnSignal&) = delete;
};

void request_interrupt();        // what the signal handler does; also for tests
void clear_interrupt_request();  // for tests
}  // namespace mixt
