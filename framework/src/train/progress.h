// Progress output: a live bar on a terminal (step/s, samples/s or tokens/s, ETA, loss, policy metrics),
// plain lines every `log_every` steps otherwise (logs, CI, pipes).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mixt {

class Progress {
 public:
  // `quiet`: print nothing (bench workers, whose stdout is JSON; ranks other than 0).
  Progress(bool terminal, std::int64_t log_every, bool quiet = false);

  // `first_step`: where a resumed epoch starts (the rate and ETA count from there).
  void start_epoch(std::int64_t epoch, std::int64_t epochs, std::int64_t steps, std::int64_t first_step = 0);
  // Whether step `step` (1-based within the epoch) will be shown: fetching the loss from
  // the device costs a synchronisation, so the trainer only does it when it is.
  bool wants(std::int64_t step) const;
  // `rate`: `rate_unit`s a second ("samples", or the task's unit: "tokens", "pixels").
  void show(std::int64_t step, double loss, double rate, const char* rate_unit,
            const std::vector<std::pair<std::string, double>>& extra);
  void end_epoch(const std::string& summary);
  void note(const std::string& line);

 private:
  using Clock = std::chrono::steady_clock;
  bool terminal_;
  bool quiet_;
  std::int64_t log_every_;
  std::int64_t epoch_ = 0, epochs_ = 0, steps_ = 0, first_step_ = 0;
  Clock::time_point epoch_start_;
  mutable Clock::time_point last_draw_;
  bool bar_drawn_ = false;
};

}  // namespace mixt
